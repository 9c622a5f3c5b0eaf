//! The settings of `tally serve`: command-line flags, `TALLY_…` environment
//! variables and an optional TOML file (`--config PATH` / `TALLY_CONFIG`),
//! in that precedence, over the built-in defaults (docs/operations.md,
//! "Configuration").
//!
//! clap parses flags and environment as before. Every setting it left at its
//! default (or unset) is then taken from the file if the file sets it: the
//! file's value is checked by the setting's own clap parser (so the bounds
//! are the same ones a flag gets) and handed to a second clap parse as if it
//! had been a flag. Every `tally serve` setting is therefore a file key
//! without being listed twice, including ones added later.

use std::any::TypeId;
use std::collections::{HashMap, HashSet};
use std::ffi::OsString;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use clap::error::ErrorKind;
use clap::parser::ValueSource;
use clap::{Arg, ArgMatches, CommandFactory, FromArgMatches};

use crate::cli::{Cli, Command};

/// The subcommand whose settings the file may hold.
const SERVE: &str = "serve";
/// Argument ids of `tally serve` that are not settings.
const NOT_SETTINGS: &[&str] = &["help", "version", "check_config"];
/// The setting that names the file, which the file cannot set.
const CONFIG: &str = "config";

pub use crate::setting::{Setting, Source};

/// A configuration that cannot be used; `tally` exits 2 before binding
/// anything.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config file {}: {message}", path.display())]
    File { path: PathBuf, message: String },
    #[error("{0}")]
    Other(String),
}

/// Like `Cli::parse()`, with the configuration file of `tally serve`
/// applied. A bad flag prints clap's usage and exits 2 (help and version
/// exit 0); a bad configuration file prints its error and exits 2.
pub fn parse_cli() -> Cli {
    match load_from(std::env::args_os().collect()) {
        Ok(cli) => cli,
        Err(Failure::Clap(e)) => e.exit(),
        Err(Failure::Config(e)) => {
            eprintln!("tally: {e}");
            std::process::exit(2)
        }
    }
}

/// Why [`load_from`] gave no command line.
#[derive(Debug)]
pub enum Failure {
    /// A flag or environment variable clap refused (or `--help`).
    Clap(clap::Error),
    Config(ConfigError),
}

impl From<clap::Error> for Failure {
    fn from(e: clap::Error) -> Self {
        Failure::Clap(e)
    }
}

impl From<ConfigError> for Failure {
    fn from(e: ConfigError) -> Self {
        Failure::Config(e)
    }
}

/// Parses `args` (the program name first) and, for `tally serve`, applies
/// the configuration file and records where every setting came from in
/// [`crate::cli::ServeArgs::effective`].
pub fn load_from(args: Vec<OsString>) -> Result<Cli, Failure> {
    let cmd = Cli::command();
    let first = cmd.clone().try_get_matches_from(&args)?;
    let serve = match first.subcommand() {
        Some((SERVE, serve)) => serve,
        Some((tool, matches)) if TOOLS.contains(&tool) => {
            return with_serve_file(&cmd, args, tool, matches, &first)
        }
        _ => return Ok(Cli::from_arg_matches(&first)?),
    };
    let Some(serve_cmd) = cmd.find_subcommand(SERVE) else {
        return Err(ConfigError::Other("tally has no serve command".into()).into());
    };
    let listed: Vec<&Arg> = serve_cmd
        .get_arguments()
        .filter(|a| a.get_long().is_some() && !NOT_SETTINGS.contains(&a.get_id().as_str()))
        .collect();
    let settings: Vec<&Arg> = listed
        .iter()
        .copied()
        .filter(|a| a.get_id() != CONFIG)
        .collect();

    let mut from_file: HashSet<String> = HashSet::new();
    let mut injected: Vec<OsString> = Vec::new();
    let config_path = serve.get_one::<PathBuf>(CONFIG).cloned();
    if let Some(path) = &config_path {
        for (arg, value) in read_file(path, serve_cmd, &settings)? {
            let id = arg.get_id().as_str();
            let explicit = matches!(
                serve.value_source(id),
                Some(ValueSource::CommandLine | ValueSource::EnvVariable)
            );
            // A flag or an environment variable wins over the file; the
            // file's value was still checked above.
            if explicit {
                continue;
            }
            let long = arg.get_long().unwrap_or(id);
            match value {
                FileValue::Flag(true) => injected.push(format!("--{long}").into()),
                FileValue::Flag(false) => {}
                FileValue::Value(raw) => injected.push(format!("--{long}={raw}").into()),
            }
            from_file.insert(id.to_owned());
        }
    }

    let (cli, last) = if injected.is_empty() {
        (Cli::from_arg_matches(&first)?, first.clone())
    } else {
        let mut all = args;
        all.extend(injected);
        let last = cmd.clone().try_get_matches_from(&all)?;
        (Cli::from_arg_matches(&last)?, last)
    };
    let Some((SERVE, last_serve)) = last.subcommand() else {
        return Err(ConfigError::Other("the second parse lost the serve command".into()).into());
    };
    let effective = listed
        .iter()
        .map(|arg| effective(arg, serve, last_serve, &from_file, config_path.as_deref()))
        .collect();
    Ok(match cli.command {
        Command::Serve(mut serve_args) => {
            serve_args.effective = effective;
            Cli {
                command: Command::Serve(serve_args),
            }
        }
        other => Cli { command: other },
    })
}

/// Commands that read the file of `tally serve` too, for the settings they
/// share with it by name (the database above all): `--config PATH`.
const TOOLS: &[&str] = &["import", "ingest"];

/// `tool`'s command line with the settings it shares with `tally serve`
/// taken from the file `--config` names, unless a flag or an environment
/// variable set them. The whole file is checked as `tally serve` checks it.
fn with_serve_file(
    cmd: &clap::Command,
    mut args: Vec<OsString>,
    tool: &str,
    matches: &ArgMatches,
    first: &ArgMatches,
) -> Result<Cli, Failure> {
    let (Some(serve_cmd), Some(mut tool_cmd)) =
        (cmd.find_subcommand(SERVE), cmd.find_subcommand(tool))
    else {
        return Err(ConfigError::Other(format!("tally has no serve or {tool} command")).into());
    };
    // `tally ingest nats`: the settings are the inner command's.
    let mut matches = matches;
    if let Some((inner, inner_matches)) = matches.subcommand() {
        let Some(inner_cmd) = tool_cmd.find_subcommand(inner) else {
            return Err(ConfigError::Other(format!("tally {tool} has no {inner} command")).into());
        };
        tool_cmd = inner_cmd;
        matches = inner_matches;
    }
    let Some(path) = matches.get_one::<PathBuf>(CONFIG).cloned() else {
        return Ok(Cli::from_arg_matches(first)?);
    };
    let settings: Vec<&Arg> = serve_cmd
        .get_arguments()
        .filter(|a| {
            a.get_long().is_some()
                && !NOT_SETTINGS.contains(&a.get_id().as_str())
                && a.get_id() != CONFIG
        })
        .collect();
    // The settings the tool shares with `tally serve`, by id; a flag of
    // the tool may be named otherwise (`--nats-url` for `ingest_nats_url`).
    let shared: HashMap<&str, &Arg> = tool_cmd
        .get_arguments()
        .map(|a| (a.get_id().as_str(), a))
        .collect();
    let mut injected = false;
    for (arg, value) in read_file(&path, serve_cmd, &settings)? {
        let id = arg.get_id().as_str();
        let Some(arg) = shared.get(id).copied() else {
            continue;
        };
        if matches!(
            matches.value_source(id),
            Some(ValueSource::CommandLine | ValueSource::EnvVariable)
        ) {
            continue;
        }
        let long = arg.get_long().unwrap_or(id);
        match value {
            FileValue::Flag(true) => args.push(format!("--{long}").into()),
            FileValue::Flag(false) => continue,
            FileValue::Value(raw) => args.push(format!("--{long}={raw}").into()),
        }
        injected = true;
    }
    if !injected {
        return Ok(Cli::from_arg_matches(first)?);
    }
    Ok(Cli::from_arg_matches(
        &cmd.clone().try_get_matches_from(&args)?,
    )?)
}

/// The effective value and source of one setting.
fn effective(
    arg: &Arg,
    first: &ArgMatches,
    last: &ArgMatches,
    from_file: &HashSet<String>,
    config_path: Option<&Path>,
) -> Setting {
    let id = arg.get_id().as_str();
    let key = file_key(arg);
    let raw: Option<Vec<String>> = last
        .try_get_raw(id)
        .ok()
        .flatten()
        .map(|values| values.map(|v| redact_url(&v.to_string_lossy())).collect());
    let value = raw.map(|values| {
        let kind = kind_of(arg);
        let rendered: Vec<String> = values.iter().map(|v| kind.render(v)).collect();
        match rendered.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        }
    });
    let source = match (config_path, from_file.contains(id)) {
        (Some(path), true) => Source::File(path.to_owned()),
        _ => match first.value_source(id) {
            Some(ValueSource::CommandLine) => Source::Flag,
            Some(ValueSource::EnvVariable) => Source::Env(
                arg.get_env()
                    .map(|e| e.to_string_lossy().into_owned())
                    .unwrap_or_default(),
            ),
            Some(ValueSource::DefaultValue) => Source::Default,
            _ => Source::Unset,
        },
    };
    let value = if source == Source::Unset { None } else { value };
    Setting { key, value, source }
}

/// The effective configuration as TOML, each line commented with its
/// source: what `tally serve --check-config` prints.
pub fn render(settings: &[Setting]) -> String {
    let width = settings
        .iter()
        .map(|s| s.key.len() + 3 + s.value.as_deref().map_or(0, str::len))
        .max()
        .unwrap_or(0);
    let mut out = String::from(
        "# tally serve: effective configuration (precedence: flag > env > file > default)\n",
    );
    for s in settings {
        let line = match &s.value {
            Some(v) => format!("{} = {v}", s.key),
            None => format!("# {}", s.key),
        };
        let _ = writeln!(out, "{line:width$}  # {}", s.source);
    }
    out
}

/// Hides the password of `scheme://user:password@host…` URLs.
pub fn redact_url(value: &str) -> String {
    match (value.find("://"), value.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &value[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _password)) => {
                    format!("{}://{user}:…{}", &value[..scheme], &value[at..])
                }
                None => value.to_owned(),
            }
        }
        _ => value.to_owned(),
    }
}

/// The file key of a setting: its long flag name with `_`.
fn file_key(arg: &Arg) -> String {
    arg.get_long()
        .unwrap_or(arg.get_id().as_str())
        .replace('-', "_")
}

/// The TOML type a setting takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Integer,
    Float,
    Bool,
    String,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Integer => "an integer",
            Kind::Float => "a number",
            Kind::Bool => "true or false",
            Kind::String => "a string",
        }
    }

    /// A raw clap value as a TOML value.
    fn render(self, raw: &str) -> String {
        match self {
            Kind::Integer | Kind::Float | Kind::Bool => raw.to_owned(),
            Kind::String => toml::Value::String(raw.to_owned()).to_string(),
        }
    }
}

fn kind_of(arg: &Arg) -> Kind {
    if !arg.get_action().takes_values() {
        return Kind::Bool;
    }
    let t = arg.get_value_parser().type_id();
    let integers = [
        TypeId::of::<u8>(),
        TypeId::of::<u16>(),
        TypeId::of::<u32>(),
        TypeId::of::<u64>(),
        TypeId::of::<usize>(),
        TypeId::of::<i8>(),
        TypeId::of::<i16>(),
        TypeId::of::<i32>(),
        TypeId::of::<i64>(),
        TypeId::of::<isize>(),
    ];
    if integers.iter().any(|i| t == *i) {
        Kind::Integer
    } else if t == TypeId::of::<f64>() || t == TypeId::of::<f32>() {
        Kind::Float
    } else if t == TypeId::of::<bool>() {
        Kind::Bool
    } else {
        Kind::String
    }
}

/// What the file gives one setting.
enum FileValue {
    /// A switch (`--flag`): given or not.
    Flag(bool),
    /// The text a flag would carry, already checked by the setting's parser.
    Value(String),
}

/// Reads and checks the whole file: every key a setting, every value of
/// the setting's type and accepted by its parser.
fn read_file<'a>(
    path: &Path,
    serve_cmd: &clap::Command,
    settings: &[&'a Arg],
) -> Result<Vec<(&'a Arg, FileValue)>, ConfigError> {
    let fail = |message: String| ConfigError::File {
        path: path.to_owned(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| fail(format!("cannot read: {e}")))?;
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| fail(format!("not valid TOML: {}", e.to_string().trim())))?;
    let by_key: HashMap<String, &Arg> = settings.iter().map(|a| (file_key(a), *a)).collect();
    let mut seen: HashMap<&str, &str> = HashMap::new();
    let mut out = Vec::new();
    for (key, value) in &table {
        let normal = key.replace('-', "_");
        let Some(arg) = by_key.get(&normal).copied() else {
            let mut known: Vec<&str> = by_key.keys().map(String::as_str).collect();
            known.sort_unstable();
            return Err(fail(format!(
                "unknown setting `{key}` (settings: {})",
                known.join(", ")
            )));
        };
        if let Some(other) = seen.insert(arg.get_id().as_str(), key) {
            return Err(fail(format!("`{other}` and `{key}` are the same setting")));
        }
        let kind = kind_of(arg);
        let wrong_type = || fail(format!("{key} = {value} must be {}", kind.name()));
        let file_value = match (kind, value) {
            (Kind::Bool, toml::Value::Boolean(b)) if !arg.get_action().takes_values() => {
                FileValue::Flag(*b)
            }
            (Kind::Bool, toml::Value::Boolean(b)) => FileValue::Value(b.to_string()),
            (Kind::Integer, toml::Value::Integer(i)) => FileValue::Value(i.to_string()),
            (Kind::Float, toml::Value::Integer(i)) => FileValue::Value(i.to_string()),
            (Kind::Float, toml::Value::Float(f)) => FileValue::Value(f.to_string()),
            (Kind::String, toml::Value::String(s)) => FileValue::Value(s.clone()),
            _ => return Err(wrong_type()),
        };
        if let FileValue::Value(raw) = &file_value {
            check_value(serve_cmd, arg, raw).map_err(|reason| {
                fail(format!(
                    "{key} = {} is invalid: {reason}",
                    kind.render(&redact_url(raw))
                ))
            })?;
        }
        out.push((arg, file_value));
    }
    Ok(out)
}

/// Runs `raw` through the setting's own clap parser, alone: the same bounds
/// and possible values a flag gets.
fn check_value(serve_cmd: &clap::Command, arg: &Arg, raw: &str) -> Result<(), String> {
    let long = arg.get_long().unwrap_or(arg.get_id().as_str());
    let attempt = serve_cmd
        .clone()
        .try_get_matches_from([SERVE.to_owned(), format!("--{long}={raw}")]);
    let Err(e) = attempt else { return Ok(()) };
    if let Some(source) = std::error::Error::source(&e) {
        return Err(source.to_string());
    }
    if e.kind() == ErrorKind::InvalidValue {
        if let Some(clap::error::ContextValue::Strings(valid)) =
            e.get(clap::error::ContextKind::ValidValue)
        {
            return Err(format!("must be one of {}", valid.join(", ")));
        }
    }
    // Any other refusal: clap's own first line, without its `error: `.
    let text = e.render().to_string();
    let first = text.lines().next().unwrap_or("refused");
    Err(first.trim_start_matches("error: ").to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    #[test]
    fn redacts_only_the_password() {
        assert_eq!(
            redact_url("postgres://u:secret@db:5432/x"),
            "postgres://u:…@db:5432/x"
        );
        assert_eq!(
            redact_url("postgres://u@db:5432/x"),
            "postgres://u@db:5432/x"
        );
        assert_eq!(redact_url("sqlite://tally.db"), "sqlite://tally.db");
    }
}
