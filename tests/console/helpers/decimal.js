// Exact decimal arithmetic for the tests (BigInt scaled integers), written
// independently of the console's own so that a bug in one is not hidden by
// the same bug in the other.
function parse(s) {
  const m = /^(-?)(\d+)(?:\.(\d+))?$/.exec(String(s).trim());
  if (!m) throw new Error(`not a decimal: ${JSON.stringify(s)}`);
  const frac = m[3] ?? '';
  const v = BigInt(`${m[2]}${frac}`);
  return { v: m[1] ? -v : v, scale: frac.length };
}

function scaled(x, scale) { return x.v * 10n ** BigInt(scale - x.scale); }

export function add(...values) {
  const xs = values.map(parse);
  const scale = Math.max(0, ...xs.map((x) => x.scale));
  const total = xs.reduce((acc, x) => acc + scaled(x, scale), 0n);
  return { v: total, scale };
}

export function equal(a, b) {
  const x = typeof a === 'string' ? parse(a) : a;
  const y = typeof b === 'string' ? parse(b) : b;
  const scale = Math.max(x.scale, y.scale);
  return scaled(x, scale) === scaled(y, scale);
}

export function sub(a, b) {
  const x = parse(a); const y = parse(b);
  const scale = Math.max(x.scale, y.scale);
  return { v: scaled(x, scale) - scaled(y, scale), scale };
}
