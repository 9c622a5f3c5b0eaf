//! The rows of an import file, read on a blocking thread and handed over in
//! chunks: JSONL (one `/v1/batch` operation per line) or CSV (a header of
//! the same field names, one operation per record).

use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde_json::{Map, Value};
use tokio::sync::mpsc;

use super::ImportError;

/// The two formats `tally import` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Jsonl,
    Csv,
}

impl Format {
    /// The format a file's name implies: `.csv` is CSV, anything else JSONL.
    pub fn of_path(path: &Path) -> Self {
        match path.extension().and_then(|e| e.to_str()) {
            Some(ext) if ext.eq_ignore_ascii_case("csv") => Format::Csv,
            _ => Format::Jsonl,
        }
    }
}

/// One row: its line in the file (1-based; a CSV record's first line) and
/// the operation, or why the row is not one.
#[derive(Debug)]
pub struct Row {
    pub line: u64,
    pub operation: Result<Value, String>,
}

/// Reads `path` and sends its rows in chunks of at most `chunk` until the
/// file ends or the receiver is gone. Runs on a blocking thread.
pub fn read_chunks(
    path: &Path,
    format: Format,
    chunk: usize,
    tx: mpsc::Sender<Vec<Row>>,
) -> Result<(), ImportError> {
    let file = File::open(path).map_err(|e| ImportError::io(path, e))?;
    let reader = BufReader::with_capacity(1 << 20, file);
    let mut batch = Vec::with_capacity(chunk);
    let send = |row: Row, batch: &mut Vec<Row>| -> bool {
        batch.push(row);
        if batch.len() < chunk {
            return true;
        }
        tx.blocking_send(std::mem::replace(batch, Vec::with_capacity(chunk)))
            .is_ok()
    };
    match format {
        Format::Jsonl => {
            for (i, line) in reader.lines().enumerate() {
                let line = line.map_err(|e| ImportError::io(path, e))?;
                let text = line.trim();
                if text.is_empty() {
                    continue;
                }
                let operation =
                    serde_json::from_str::<Value>(text).map_err(|e| format!("is not JSON: {e}"));
                if !send(row(i as u64 + 1, operation), &mut batch) {
                    return Ok(());
                }
            }
        }
        Format::Csv => {
            let mut csv = csv::ReaderBuilder::new()
                .has_headers(true)
                .from_reader(reader);
            let headers = csv
                .headers()
                .map_err(|e| ImportError::Format(format!("{}: {e}", path.display())))?
                .clone();
            let mut record = csv::StringRecord::new();
            loop {
                let (line, operation) = match csv.read_record(&mut record) {
                    Ok(false) => break,
                    Ok(true) => (
                        record.position().map_or(0, csv::Position::line),
                        Ok(csv_operation(&headers, &record)),
                    ),
                    Err(e) => match e.kind() {
                        csv::ErrorKind::Io(_) => {
                            return Err(ImportError::Format(format!("{}: {e}", path.display())))
                        }
                        _ => (
                            e.position().map_or(0, csv::Position::line),
                            Err(format!("is not a CSV record of the header's fields: {e}")),
                        ),
                    },
                };
                if !send(Row { line, operation }, &mut batch) {
                    return Ok(());
                }
            }
        }
    }
    if !batch.is_empty() {
        let _ = tx.blocking_send(batch);
    }
    Ok(())
}

fn row(line: u64, operation: Result<Value, String>) -> Row {
    Row { line, operation }
}

/// A CSV record as the operation object its header names. Every cell is a
/// string except where the operation takes another type: `metadata` is a
/// JSON object, `ttl_seconds` an integer. An empty cell is an absent field.
fn csv_operation(headers: &csv::StringRecord, record: &csv::StringRecord) -> Value {
    let mut op = Map::new();
    for (name, cell) in headers.iter().zip(record.iter()) {
        if cell.is_empty() {
            continue;
        }
        let value = match name {
            // Left as text when it is not JSON: the field's own check then
            // says what it must be.
            "metadata" => serde_json::from_str(cell).unwrap_or_else(|_| Value::from(cell)),
            "ttl_seconds" => cell
                .parse::<i64>()
                .map_or_else(|_| Value::from(cell), Value::from),
            _ => Value::from(cell),
        };
        op.insert(name.to_owned(), value);
    }
    Value::Object(op)
}

/// About how many rows `path` holds (its lines, less a CSV header), for the
/// progress bar's length and ETA.
pub fn count_rows(path: &Path, format: Format) -> Result<u64, ImportError> {
    let mut file = File::open(path).map_err(|e| ImportError::io(path, e))?;
    let mut buf = vec![0u8; 1 << 20];
    let (mut lines, mut last) = (0u64, b'\n');
    loop {
        let n = file.read(&mut buf).map_err(|e| ImportError::io(path, e))?;
        if n == 0 {
            break;
        }
        lines += buf[..n].iter().filter(|b| **b == b'\n').count() as u64;
        last = buf[n - 1];
    }
    if last != b'\n' {
        lines += 1;
    }
    Ok(match format {
        Format::Csv => lines.saturating_sub(1),
        Format::Jsonl => lines,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn read(text: &str, format: Format) -> Vec<Row> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rows");
        std::fs::write(&path, text).unwrap();
        let (tx, mut rx) = mpsc::channel(100);
        read_chunks(&path, format, 2, tx).unwrap();
        let mut rows = Vec::new();
        while let Ok(chunk) = rx.try_recv() {
            assert!(chunk.len() <= 2);
            rows.extend(chunk);
        }
        rows
    }

    #[test]
    fn jsonl_rows_keep_their_line_numbers_and_skip_blank_lines() {
        let rows = read("{\"a\":1}\n\n not json\n{\"b\":2}", Format::Jsonl);
        let lines: Vec<u64> = rows.iter().map(|r| r.line).collect();
        assert_eq!(lines, [1, 3, 4]);
        assert!(rows[1].operation.is_err());
        assert_eq!(rows[2].operation.as_ref().unwrap()["b"], 2);
    }

    #[test]
    fn csv_cells_become_fields_with_metadata_and_ttl_typed() {
        let text = "type,hold_id,amount,ttl_seconds,metadata,unit\n\
                    hold,h1,1.5,60,\"{\"\"k\"\":\"\"v\"\"}\",\n\
                    hold,h2\n";
        let rows = read(text, Format::Csv);
        assert_eq!(rows.len(), 2);
        let first = rows[0].operation.as_ref().unwrap();
        assert_eq!(rows[0].line, 2);
        assert_eq!(first["ttl_seconds"], 60);
        assert_eq!(first["metadata"]["k"], "v");
        assert_eq!(first["amount"], "1.5");
        assert!(first.get("unit").is_none(), "an empty cell is absent");
        assert_eq!(rows[1].line, 3);
        assert!(rows[1].operation.is_err(), "a short record is refused");
    }

    #[test]
    fn rows_are_counted_without_the_csv_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, "h\na\nb").unwrap();
        assert_eq!(count_rows(&path, Format::Csv).unwrap(), 2);
        assert_eq!(count_rows(&path, Format::Jsonl).unwrap(), 3);
    }
}
