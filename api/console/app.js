// tally finance console: one ES module, vanilla JS, no build step.
// Served by `tally serve` at /console (index.html, app.js, style.css).
//
// Rules this file keeps:
// - The API key lives in sessionStorage only: never in a URL, never logged.
// - Money is a decimal string. It is shown as the ledger sends it, and any
//   arithmetic (the statement check) uses BigInt scaled integers, never floats.
// - Every view is reproducible from its URL (/console/<view>?<filters>).
// - The DOM is built with DOM APIs (no innerHTML with data, no inline styles),
//   so the page works under the server's strict Content-Security-Policy.

// ===========================================================================
// Session
// ===========================================================================

const KEY_STORAGE = 'tally.console.key';
const NO_AUDIT_STORAGE = 'tally.console.no_audit';
const BASE = '/console';

const session = {
  key: () => sessionStorage.getItem(KEY_STORAGE),
  set(key) { sessionStorage.setItem(KEY_STORAGE, key); sessionStorage.removeItem(NO_AUDIT_STORAGE); },
  clear() { sessionStorage.removeItem(KEY_STORAGE); sessionStorage.removeItem(NO_AUDIT_STORAGE); },
  lacksAudit: () => sessionStorage.getItem(NO_AUDIT_STORAGE) === '1',
  markLacksAudit() { sessionStorage.setItem(NO_AUDIT_STORAGE, '1'); },
};

// ===========================================================================
// Exact decimals (BigInt scaled integers)
// ===========================================================================

const DEC_RE = /^([+-]?)(\d+)(?:\.(\d+))?$/;

function parseDec(s) {
  const m = DEC_RE.exec(String(s).trim());
  if (!m) throw new Error(`not a decimal: ${s}`);
  const frac = m[3] || '';
  let v = BigInt(m[2] + frac);
  if (m[1] === '-') v = -v;
  return { v, scale: frac.length };
}

function fmtDec(v, scale) {
  const neg = v < 0n;
  const digits = (neg ? -v : v).toString().padStart(scale + 1, '0');
  const int = digits.slice(0, digits.length - scale);
  const frac = digits.slice(digits.length - scale).replace(/0+$/, '');
  return (neg ? '-' : '') + int + (frac ? `.${frac}` : '');
}

function aligned(a, b) {
  const x = parseDec(a);
  const y = parseDec(b);
  const s = Math.max(x.scale, y.scale);
  return [x.v * 10n ** BigInt(s - x.scale), y.v * 10n ** BigInt(s - y.scale), s];
}

const dec = {
  add(a, b) { const [x, y, s] = aligned(a, b); return fmtDec(x + y, s); },
  sub(a, b) { const [x, y, s] = aligned(a, b); return fmtDec(x - y, s); },
  cmp(a, b) { const [x, y] = aligned(a, b); return x < y ? -1 : x > y ? 1 : 0; },
  sum(list) { return list.reduce((acc, d) => dec.add(acc, d), '0'); },
  neg(a) { return dec.sub('0', a); },
  canon(a) { const x = parseDec(a); return fmtDec(x.v, x.scale); },
  isNeg(a) { return dec.cmp(a, '0') < 0; },
};

// ===========================================================================
// DOM helpers
// ===========================================================================

function h(tag, attrs = {}, ...children) {
  const el = tag === 'svg' || attrs.svg
    ? document.createElementNS('http://www.w3.org/2000/svg', tag)
    : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined || v === false || k === 'svg') continue;
    if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'value' && 'value' in el) el.value = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
  append(el, children);
  return el;
}

function s(tag, attrs = {}, ...children) { return h(tag, { ...attrs, svg: true }, ...children); }

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

function clear(el) { while (el.firstChild) el.firstChild.remove(); return el; }
function fill(el, ...children) { return append(clear(el), children); }

function announce(text) {
  const a = document.getElementById('announcer');
  a.textContent = '';
  setTimeout(() => { a.textContent = text; }, 50);
}

function link(view, params, ...children) { return h('a', { href: viewUrl(view, params) }, ...children); }
function accountLink(account) {
  return account && !account.startsWith('@') ? link('account', { account }, account) : h('span', { class: 'mono' }, account ?? '—');
}
function entryLink(id, text) { return link('entry', { id }, h('span', { class: 'mono' }, text ?? id)); }

function money(amount, unit, { signed = false } = {}) {
  if (amount === null || amount === undefined) return h('span', { class: 'muted' }, '—');
  const neg = signed && dec.isNeg(amount);
  return h('span', { class: `amount${neg ? ' negative' : ''}` },
    h('span', { class: 'value' }, amount), unit ? [' ', h('span', { class: 'unit' }, unit)] : null);
}

function field(label, input) {
  const id = input.id || `f_${input.name}`;
  input.id = id;
  return h('div', { class: 'field' }, h('label', { for: id }, label), input);
}

function textInput(name, value, attrs = {}) {
  return h('input', { type: 'text', name, value: value ?? '', autocomplete: 'off', spellcheck: 'false', ...attrs });
}

function select(name, options, value) {
  const el = h('select', { name });
  const all = value && !options.some(([v]) => v === value) ? [...options, [value, value]] : options;
  for (const [v, label] of all) el.append(h('option', { value: v }, label));
  el.value = value ?? '';
  return el;
}

function table({ caption, hint, columns, rows, className }) {
  return h('div', { class: 'table-wrap' },
    h('table', { class: className },
      h('caption', {}, caption, hint ? h('span', { class: 'hint' }, hint) : null),
      h('thead', {}, h('tr', {}, columns.map((c) =>
        h('th', { scope: 'col', class: c.num ? 'num' : null, 'aria-sort': c.sort ?? null }, c.header ?? c.label)))),
      h('tbody', {}, rows)));
}

function kvList(pairs) {
  return h('dl', { class: 'kv' }, pairs.filter(Boolean).map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

function message(kind, ...content) {
  return h('div', { class: `message ${kind}`, role: kind === 'error' ? 'alert' : 'status' }, ...content);
}

function jsonBlock(value) { return h('pre', { class: 'json' }, JSON.stringify(value, null, 2)); }

// ===========================================================================
// Time: UTC ISO, with the browser's local time beside it
// ===========================================================================

const localFmt = new Intl.DateTimeFormat(undefined, {
  year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit', second: '2-digit',
  hour12: false, timeZoneName: 'short',
});

function when(iso) {
  if (!iso) return h('span', { class: 'muted' }, '—');
  const d = new Date(iso);
  const local = Number.isNaN(d.getTime()) ? '' : `local ${localFmt.format(d)}`;
  return h('span', { class: 'when' }, h('time', { datetime: iso, class: 'mono' }, iso), local ? h('span', { class: 'local' }, local) : null);
}

const pad = (n) => String(n).padStart(2, '0');
function monthStart(year, month) { return new Date(Date.UTC(year, month, 1)); }
function isoSeconds(d) { return d.toISOString().replace(/\.\d{3}Z$/, 'Z'); }

function monthPresets(count = 13) {
  const now = new Date();
  const out = [];
  for (let i = 0; i < count; i += 1) {
    const start = monthStart(now.getUTCFullYear(), now.getUTCMonth() - i);
    const end = monthStart(start.getUTCFullYear(), start.getUTCMonth() + 1);
    const name = `${start.getUTCFullYear()}-${pad(start.getUTCMonth() + 1)}`;
    out.push({ name: i === 0 ? `${name} (month to date)` : name, from: isoSeconds(start), to: isoSeconds(end) });
  }
  return out;
}

// ===========================================================================
// API client
// ===========================================================================

class ApiError extends Error {
  constructor(status, body, path) {
    super(body?.detail || `HTTP ${status}`);
    this.status = status;
    this.body = body;
    this.path = path;
    this.code = body?.code;
  }
}

let routeAbort = new AbortController();

function qs(params) {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') p.set(k, v);
  const str = p.toString();
  return str ? `?${str}` : '';
}

async function apiFetch(path, { method = 'GET', signal = routeAbort.signal } = {}) {
  const key = session.key();
  if (!key) { showSignIn('Sign in to continue.'); throw new ApiError(401, { detail: 'not signed in' }, path); }
  let res;
  try {
    res = await fetch(path, {
      method, signal, cache: 'no-store', credentials: 'omit', referrerPolicy: 'no-referrer',
      headers: { Authorization: `Bearer ${key}`, Accept: 'application/json' },
    });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(0, { detail: 'the tally server could not be reached' }, path);
  }
  if (res.ok) return res;
  let body = null;
  try { body = await res.json(); } catch { body = null; }
  const err = new ApiError(res.status, body, path);
  err.serverDate = res.headers.get('Date');
  if (res.status === 401) showSignIn('The server no longer accepts this key (unknown or revoked). Sign in again.');
  if (res.status === 403 && path.startsWith('/v1/audit')) session.markLacksAudit();
  throw err;
}

async function api(path, opts) { return (await apiFetch(path, opts)).json(); }

function scopeOf(path) {
  if (path.startsWith('/v1/audit')) return 'audit';
  // Actions the console offers beyond reading: a Stripe event's reapply.
  if (/^\/v1\/integrations\/stripe\/events\/[^/?]+\/reapply$/.test(path)) return 'post';
  return 'read';
}

// `verb` and `forbidden` word an action's failure ("Could not reapply …");
// by default the failure is a read's ("Could not load …").
function errorMessage(err, what, { verb = 'load', forbidden = `${what} cannot be shown` } = {}) {
  if (err?.name === 'AbortError') return null;
  if (!(err instanceof ApiError)) return message('error', h('p', {}, `Could not ${verb} ${what}: ${err?.message ?? err}`));
  if (err.status === 401) return message('error', h('p', {}, 'Your key was rejected: sign in again.'));
  if (err.status === 403) {
    const scope = scopeOf(err.path);
    const needs = scope === 'post' ? 'the read and post scopes' : `the ${scope} scope`;
    return message('error', h('p', {}, 'This key lacks the ', h('code', {}, scope), ` scope, so ${forbidden}.`),
      h('p', {}, `Ask an administrator for a key with ${needs}, then sign out and sign in with it.`));
  }
  if (err.status === 404 && err.body?.detail === 'no such route') {
    return message('warn', h('p', {}, `This tally server does not offer ${what} yet (`, h('code', {}, err.path.split('?')[0]), ' answered 404).'));
  }
  if (err.status === 0) return message('error', h('p', {}, `Could not ${verb} ${what}: the tally server could not be reached.`));
  const problems = (err.body?.errors || []).map((e) => h('li', {}, h('code', {}, e.field), ` ${e.message}`));
  return message('error', h('p', {}, `Could not ${verb} ${what}: ${err.message} (HTTP ${err.status}${err.code ? `, ${err.code}` : ''}).`),
    problems.length ? h('ul', {}, problems) : null);
}

function showError(container, err, what) {
  const m = errorMessage(err, what);
  if (m) fill(container, m);
}

const enc = encodeURIComponent;

// ===========================================================================
// Router
// ===========================================================================

const views = {};

function viewUrl(view, params = {}) { return `${BASE}/${view}${qs(params)}`; }

function currentView() {
  const rest = location.pathname.slice(BASE.length).replace(/^\/+|\/+$/g, '');
  const name = rest.split('/')[0] || 'accounts';
  return views[name] ? name : 'notfound';
}

function navigate(url, { replace = false } = {}) {
  if (replace) history.replaceState({}, '', url);
  else history.pushState({}, '', url);
  render();
}

function params() { return Object.fromEntries(new URLSearchParams(location.search)); }

function setNav(signedIn, view) {
  const nav = document.getElementById('nav');
  nav.hidden = !signedIn;
  for (const a of nav.querySelectorAll('a[data-section]')) {
    const active = a.dataset.section === view || (a.dataset.section === 'accounts' && view === 'account')
      || (a.dataset.section === 'entries' && view === 'entry') || (a.dataset.section === 'intents' && view === 'intent');
    if (active) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
  }
}

function render({ focus = true } = {}) {
  routeAbort.abort();
  routeAbort = new AbortController();
  const main = clear(document.getElementById('main'));
  if (!session.key()) { renderSignIn(main); return; }
  const view = currentView();
  setNav(true, view);
  const signal = routeAbort.signal;
  Promise.resolve(views[view](main, params(), signal)).catch((e) => {
    if (e?.name !== 'AbortError' && !signal.aborted) { const m = errorMessage(e, 'this page'); if (m) main.append(m); }
  });
  if (focus) {
    const h1 = main.querySelector('h1');
    if (h1) { h1.setAttribute('tabindex', '-1'); h1.focus({ preventScroll: true }); }
  }
}

function pageTitle(main, title, ...extra) {
  document.title = `${title} · tally console`;
  main.append(h('h1', {}, title, ...extra));
}

function submitTo(view, form, extra = {}) {
  const data = {};
  for (const [k, v] of new FormData(form)) if (String(v).trim() !== '') data[k] = String(v).trim();
  navigate(viewUrl(view, { ...data, ...extra }));
}

document.addEventListener('click', (e) => {
  if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  const a = e.target.closest('a[href]');
  if (!a || a.hasAttribute('download') || a.target) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || !(url.pathname === BASE || url.pathname.startsWith(`${BASE}/`))) return;
  e.preventDefault();
  navigate(url.pathname + url.search + url.hash);
});

window.addEventListener('popstate', () => render());

// ===========================================================================
// Sign in / sign out
// ===========================================================================

let signInNotice = '';

function showSignIn(notice) {
  session.clear();
  signInNotice = notice || '';
  render();
}

function renderSignIn(main) {
  setNav(false);
  document.title = 'Sign in · tally console';
  const input = h('input', {
    type: 'password', id: 'api-key', name: 'key', required: true, autocomplete: 'off',
    spellcheck: 'false', 'aria-describedby': 'api-key-hint',
  });
  const status = h('div', { id: 'signin-status' });
  const button = h('button', { type: 'submit' }, 'Sign in');
  const form = h('form', { method: 'post', action: '#', novalidate: true },
    h('div', { class: 'field' }, h('label', { for: 'api-key' }, 'API key'), input,
      h('p', { class: 'hint', id: 'api-key-hint' },
        'A key with the read scope (audit for the audit page, post to reapply Stripe events). It is kept in this tab\u2019s session storage only, and forgotten when you sign out or close the tab.')),
    button, status);
  form.addEventListener('submit', (e) => { e.preventDefault(); signIn(input, button, status); });
  main.append(h('section', { class: 'signin', 'aria-labelledby': 'signin-title' },
    h('h1', { id: 'signin-title' }, 'Sign in'),
    signInNotice ? message('warn', h('p', {}, signInNotice)) : null,
    form));
  signInNotice = '';
  input.focus();
}

async function signIn(input, button, status) {
  const key = input.value.trim();
  clear(status);
  if (!key) { status.append(message('error', h('p', {}, 'Enter an API key.'))); input.focus(); return; }
  button.disabled = true;
  status.append(h('p', { class: 'muted', role: 'status' }, 'Checking the key…'));
  let res;
  try {
    res = await fetch('/v1/entries?limit=1', {
      cache: 'no-store', credentials: 'omit', headers: { Authorization: `Bearer ${key}`, Accept: 'application/json' },
    });
  } catch {
    res = null;
  }
  button.disabled = false;
  clear(status);
  if (res && res.ok) {
    input.value = '';
    session.set(key);
    announce('Signed in.');
    render();
    return;
  }
  const text = !res ? 'The tally server could not be reached.'
    : res.status === 401 ? 'Unknown key: the server does not accept it (mistyped, or revoked).'
      : res.status === 403 ? 'This key lacks the read scope, which the console needs.'
        : `The server answered HTTP ${res.status}.`;
  status.append(message('error', h('p', {}, text)));
  input.focus();
}

document.getElementById('sign-out').addEventListener('click', () => {
  session.clear();
  signInNotice = 'You are signed out; the key was forgotten.';
  history.pushState({}, '', BASE);
  render();
});

// ===========================================================================
// Accounts list
// ===========================================================================

const ACCOUNT_COLUMNS = [
  { key: 'account', label: 'Account' },
  { key: 'unit', label: 'Unit' },
  { key: 'posted', label: 'Posted', num: true },
  { key: 'held', label: 'Held', num: true },
  { key: 'available', label: 'Available', num: true },
];

function compareAccounts(a, b, key) {
  const col = ACCOUNT_COLUMNS.find((c) => c.key === key) || ACCOUNT_COLUMNS[0];
  if (col.num) return dec.cmp(a[key], b[key]);
  return a[key] < b[key] ? -1 : a[key] > b[key] ? 1 : 0;
}

views.accounts = async (main, p, signal) => {
  pageTitle(main, 'Accounts');
  const limit = p.limit || '100';
  const searchForm = h('form', { class: 'filters', role: 'search', 'aria-label': 'Accounts' },
    field('Search account IDs', h('input', { type: 'search', name: 'q', value: p.q ?? '', autocomplete: 'off', spellcheck: 'false' })),
    field('Page size', select('limit', [['50', '50'], ['100', '100'], ['500', '500'], ['1000', '1000']], limit)),
    h('button', { type: 'submit' }, 'Search'));
  searchForm.addEventListener('submit', (e) => { e.preventDefault(); submitTo('accounts', searchForm); });
  const openForm = h('form', { class: 'inline', 'aria-label': 'Open an account' },
    field('Open account by ID', textInput('account', '', { class: 'mono-input' })),
    h('button', { type: 'submit', class: 'secondary' }, 'Open'));
  openForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const id = new FormData(openForm).get('account')?.toString().trim();
    if (id) navigate(viewUrl('account', { account: id }));
  });
  const out = h('div', {}, h('p', { class: 'muted' }, 'Loading accounts…'));
  main.append(searchForm, openForm, out);

  let page;
  try {
    page = await api(`/v1/accounts${qs({ after: p.after, limit, q: p.q })}`, { signal });
  } catch (e) { showError(out, e, 'the account list'); return; }
  renderAccountsTable(out, page, p, limit);
};

function renderAccountsTable(out, page, p, limit) {
  clear(out);
  const sortKey = p.sort || 'account';
  const dir = p.dir === 'desc' ? 'desc' : 'asc';
  const rows = [...page.accounts].sort((a, b) => compareAccounts(a, b, sortKey) * (dir === 'desc' ? -1 : 1));
  const columns = ACCOUNT_COLUMNS.map((c) => {
    const active = c.key === sortKey;
    const nextDir = active && dir === 'asc' ? 'desc' : 'asc';
    const button = h('button', { type: 'button', class: 'sort' }, c.label,
      h('span', { class: 'dir', 'aria-hidden': 'true' }, active ? (dir === 'asc' ? '▲' : '▼') : ''),
      h('span', { class: 'visually-hidden' }, active ? ` (sorted ${dir === 'asc' ? 'ascending' : 'descending'}; activate to reverse)` : ' (activate to sort)'));
    button.addEventListener('click', () => navigate(viewUrl('accounts', { ...p, sort: c.key, dir: nextDir }), { replace: true }));
    return { ...c, header: button, sort: active ? (dir === 'asc' ? 'ascending' : 'descending') : null };
  });
  const body = rows.map((a) => h('tr', {},
    h('th', { scope: 'row' }, accountLink(a.account)),
    h('td', {}, a.unit),
    h('td', { class: 'num' }, money(a.posted, a.unit, { signed: true })),
    h('td', { class: 'num' }, money(a.held, a.unit)),
    h('td', { class: 'num' }, money(a.available, a.unit, { signed: true }))));
  const from = page.accounts[0]?.account;
  out.append(table({
    caption: p.q ? `Accounts matching \u201c${p.q}\u201d` : 'Accounts',
    hint: `${page.accounts.length} on this page${from ? `, from ${from}` : ''}. The server pages in account-ID order; sorting by a column sorts this page only.`,
    columns,
    rows: body.length ? body : [h('tr', {}, h('td', { colspan: 5 }, 'No accounts match.'))],
  }));
  const pager = h('nav', { class: 'pager', 'aria-label': 'Account pages' });
  if (p.after) pager.append(link('accounts', { q: p.q, limit: p.limit, sort: p.sort, dir: p.dir }, 'First page'));
  if (page.next_after) pager.append(link('accounts', { q: p.q, limit: p.limit, after: page.next_after, sort: p.sort, dir: p.dir }, 'Next page'));
  else pager.append(h('span', { class: 'muted' }, 'Last page.'));
  out.append(pager);
  announce(`${page.accounts.length} accounts shown.`);
}

// ===========================================================================
// Account page: balance, balance as of, statement, usage, settings
// ===========================================================================

views.account = async (main, p, signal) => {
  const account = p.account;
  if (!account) { pageTitle(main, 'Account'); main.append(message('warn', h('p', {}, 'No account given. '), link('accounts', {}, 'Find one in the account list.'))); return; }
  pageTitle(main, 'Account ', h('span', { class: 'mono' }, account));
  const now = h('section', { 'aria-labelledby': 'h-now' }, h('h2', { id: 'h-now' }, 'Balance now'), h('p', { class: 'muted' }, 'Loading…'));
  const asOf = h('section', { 'aria-labelledby': 'h-asof' }, h('h2', { id: 'h-asof' }, 'Balance at a chosen time'));
  const statement = h('section', { 'aria-labelledby': 'h-statement' }, h('h2', { id: 'h-statement' }, 'Statement'));
  const usage = h('section', { 'aria-labelledby': 'h-usage' }, h('h2', { id: 'h-usage' }, 'Usage'));
  const settings = h('section', { 'aria-labelledby': 'h-settings' }, h('h2', { id: 'h-settings' }, 'Settings'), h('p', { class: 'muted' }, 'Loading…'));
  main.append(h('div', { class: 'grid-2' }, now, asOf), statement, usage, settings);

  const base = `/v1/accounts/${enc(account)}`;
  const accountReq = api(base, { signal });
  accountReq.then((a) => renderBalanceNow(now, a), (e) => showErrorKeepHeading(now, e, 'the account'));
  renderAsOf(asOf, account, p, signal);
  renderStatementSection(statement, account, p, signal);
  renderUsageSection(usage, account, p, signal);
  accountReq.then((a) => renderSettings(settings, a, signal), (e) => showErrorKeepHeading(settings, e, 'the account settings'));
};

function showErrorKeepHeading(section, err, what) {
  const m = errorMessage(err, what);
  if (!m) return;
  const heading = section.querySelector('h2');
  fill(section, heading, m);
}

function balanceTable(caption, b, unit) {
  const rows = [['Posted', b.posted, true], ['Held', b.held, false], ['Available', b.available, true], ['Debits', b.debits, false], ['Credits', b.credits, false]]
    .map(([label, v, signed]) => h('tr', {}, h('th', { scope: 'row' }, label), h('td', { class: 'num' }, money(v, unit, { signed }))));
  return table({ caption, columns: [{ label: 'Figure' }, { label: 'Amount', num: true }], rows, className: 'balance' });
}

function renderBalanceNow(section, a) {
  const heading = section.querySelector('h2');
  fill(section, heading,
    balanceTable(`Balance of ${a.account} as of seq ${a.balance.as_of_seq}`, a.balance, a.unit),
    h('p', { class: 'hint' }, 'Posted = credits \u2212 debits; available = posted \u2212 held.'));
}

function renderAsOf(section, account, p, signal) {
  const form = h('form', { class: 'inline', 'aria-label': 'Balance at a time' },
    field('As of (UTC, RFC 3339)', textInput('as_of', p.as_of, { class: 'mono-input wide', placeholder: 'e.g. 2026-11-30T23:59:59Z', 'aria-describedby': 'asof-hint' })),
    h('button', { type: 'submit' }, 'Show balance'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const v = new FormData(form).get('as_of').toString().trim();
    navigate(viewUrl('account', { ...p, as_of: v || undefined }), { replace: false });
  });
  const out = h('div');
  section.append(form, h('p', { class: 'hint', id: 'asof-hint' }, 'Entries recorded at or before this time.'), out);
  if (!p.as_of) return;
  out.append(h('p', { class: 'muted' }, 'Loading…'));
  api(`/v1/accounts/${enc(account)}/balance${qs({ as_of: p.as_of })}`, { signal })
    .then((b) => fill(out, balanceTable(`Balance as of ${p.as_of} (seq ${b.as_of_seq})`, b, b.unit)),
      (e) => showError(out, e, 'the balance at that time'));
}

// ---- Statement ------------------------------------------------------------

function statementPeriod(p) {
  if (p.from && p.to) return { from: p.from, to: p.to };
  const cur = monthPresets(1)[0];
  return { from: cur.from, to: cur.to };
}

function renderStatementSection(section, account, p, signal) {
  const period = statementPeriod(p);
  const presets = monthPresets();
  const presetSelect = select('preset', [['', 'Custom period'], ...presets.map((m, i) => [String(i), m.name])],
    String(presets.findIndex((m) => m.from === period.from && m.to === period.to)).replace('-1', ''));
  presetSelect.removeAttribute('name');
  presetSelect.id = 'f_preset';
  const fromIn = textInput('from', period.from, { class: 'mono-input', 'aria-describedby': 'period-hint' });
  const toIn = textInput('to', period.to, { class: 'mono-input', 'aria-describedby': 'period-hint' });
  presetSelect.addEventListener('change', () => {
    const m = presets[Number(presetSelect.value)];
    if (presetSelect.value !== '' && m) { fromIn.value = m.from; toIn.value = m.to; }
  });
  const form = h('form', { class: 'filters', 'aria-label': 'Statement period' },
    field('Month', presetSelect), field('From (UTC, inclusive)', fromIn), field('To (UTC, exclusive)', toIn),
    h('button', { type: 'submit' }, 'Show statement'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    navigate(viewUrl('account', { ...p, from: fromIn.value.trim(), to: toIn.value.trim() }));
  });
  const out = h('div', {}, h('p', { class: 'muted' }, 'Loading the statement…'));
  section.append(form, h('p', { class: 'hint', id: 'period-hint' }, 'On recorded time. A period that ends in the future ends now.'), out);
  loadStatement(account, period, signal).then((st) => renderStatement(out, st), (e) => showError(out, e, 'the statement'));
}

async function loadStatement(account, period, signal) {
  let to = period.to;
  const t = Date.parse(to);
  if (!Number.isNaN(t) && t > Date.now()) to = new Date().toISOString();
  const path = (toValue) => `/v1/accounts/${enc(account)}/statement${qs({ from: period.from, to: toValue })}`;
  try {
    return await api(path(to), { signal });
  } catch (e) {
    // The server's clock may be behind ours: retry once at the server's time.
    const future = e instanceof ApiError && e.status === 422 && (e.body?.errors || []).some((x) => x.field === 'to' && /future/.test(x.message));
    if (!future || !e.serverDate) throw e;
    return api(path(new Date(e.serverDate).toISOString()), { signal });
  }
}

function statementRows(st) {
  let running = st.opening_balance.posted;
  return st.entries.map((e) => {
    const change = dec.sub(e.balance_after, running);
    running = e.balance_after;
    return { e, change };
  });
}

function renderStatement(out, st) {
  clear(out);
  const u = st.unit;
  const m = st.movements;
  const o = st.opening_balance;
  const c = st.closing_balance;
  const availMove = dec.sub(m.net, m.held);
  const rows = statementRows(st);
  const computed = {
    posted: dec.add(o.posted, m.net), held: dec.add(o.held, m.held), available: dec.add(o.available, availMove),
  };
  const entrySum = dec.sum(rows.map((r) => r.change));
  const ok = dec.cmp(computed.posted, c.posted) === 0 && dec.cmp(computed.held, c.held) === 0
    && dec.cmp(computed.available, c.available) === 0 && dec.cmp(entrySum, m.net) === 0;
  const line = (label, debits, credits, posted, held, avail, id) => h('tr', id ? { id } : {},
    h('th', { scope: 'row' }, label),
    h('td', { class: 'num' }, money(debits, u)), h('td', { class: 'num' }, money(credits, u)),
    h('td', { class: 'num', dataset: { figure: 'posted' } }, money(posted, u, { signed: true })),
    h('td', { class: 'num', dataset: { figure: 'held' } }, money(held, u, { signed: true })),
    h('td', { class: 'num', dataset: { figure: 'available' } }, money(avail, u, { signed: true })));
  out.append(
    h('p', {}, 'Period ', when(st.from), ' to ', when(st.to), ` (exclusive); closing as of seq ${st.as_of_seq}.`),
    table({
      caption: `Statement summary of ${st.account} (${u})`,
      columns: [{ label: 'Line' }, { label: 'Debits', num: true }, { label: 'Credits', num: true },
        { label: 'Posted', num: true }, { label: 'Held', num: true }, { label: 'Available', num: true }],
      rows: [
        line('Opening balance', o.debits, o.credits, o.posted, o.held, o.available, 'st-opening'),
        line(`Movements (${m.entries} entries)`, m.debits, m.credits, m.net, m.held, availMove, 'st-movements'),
        line('Closing balance', c.debits, c.credits, c.posted, c.held, c.available, 'st-closing'),
      ],
      className: 'statement-summary',
    }),
    h('p', { class: `check ${ok ? 'ok' : 'bad'}`, id: 'st-check', role: 'status' },
      ok ? '\u2713 Opening + movements = closing (checked in the browser with exact decimals; the entries\u2019 posted changes add up to the net movement).'
        : '\u2717 Opening + movements does NOT equal closing: report this statement to the ledger operators.'),
    h('div', { class: 'buttons' }, downloadButton('Download statement CSV', () => statementCsv(st),
      `statement_${st.account}_${st.from.slice(0, 10)}_${st.to.slice(0, 10)}.csv`, 'text/csv')),
    statementEntriesTable(st, rows));
}

function statementEntriesTable(st, rows) {
  const LIMIT = 500;
  const wrap = h('div');
  const draw = (all) => {
    const shown = all ? rows : rows.slice(0, LIMIT);
    fill(wrap, table({
      caption: `Entries in the period (${rows.length})`,
      hint: 'Posted change is the change of the posted balance the entry made (credits positive). Rejected entries move nothing.',
      columns: [{ label: 'Seq', num: true }, { label: 'Recorded (UTC)' }, { label: 'Kind' }, { label: 'Status' },
        { label: 'Upstream ID' }, { label: 'Amount', num: true }, { label: 'Posted change', num: true }, { label: 'Balance after', num: true }],
      rows: shown.length ? shown.map(({ e, change }) => h('tr', { class: e.status === 'rejected' ? 'rejected' : null },
        h('td', { class: 'num mono' }, entryLink(e.id, String(e.seq))),
        h('td', {}, when(e.recorded_at)),
        h('td', {}, e.kind),
        h('td', { class: 'status' }, statusBadge(e)),
        h('td', { class: 'mono' }, e.upstream_id),
        h('td', { class: 'num' }, money(e.amount, e.unit)),
        h('td', { class: 'num posted-change' }, money(change, st.unit, { signed: true })),
        h('td', { class: 'num' }, money(e.balance_after, st.unit, { signed: true }))))
        : [h('tr', {}, h('td', { colspan: 8 }, 'No entries in this period.'))],
      className: 'statement-entries',
    }));
    if (!all && rows.length > LIMIT) {
      wrap.append(h('button', { type: 'button', class: 'secondary', onclick: () => draw(true) }, `Show all ${rows.length} entries`));
    }
  };
  draw(false);
  return wrap;
}

function statusBadge(e) {
  return [h('span', { class: `badge ${e.status}` }, e.status), e.rejection ? h('span', { class: 'mono' }, ` ${e.rejection.code}`) : null];
}

const CSV_COLUMNS = ['seq', 'id', 'recorded_at', 'occurred_at', 'kind', 'status', 'upstream_id', 'account', 'debit_account',
  'credit_account', 'amount', 'unit', 'meter', 'quantity', 'balance_after', 'rejection_code', 'hash'];

function csvCell(v) {
  const str = v === null || v === undefined ? '' : String(v);
  return /[",\r\n]/.test(str) ? `"${str.replace(/"/g, '""')}"` : str;
}

function statementCsv(st) {
  const lines = [CSV_COLUMNS.join(',')];
  for (const e of st.entries) {
    lines.push(CSV_COLUMNS.map((k) => csvCell(k === 'rejection_code' ? e.rejection?.code : e[k])).join(','));
  }
  return `${lines.join('\r\n')}\r\n`;
}

function downloadBlob(blob, filename) {
  const url = URL.createObjectURL(blob);
  const a = h('a', { href: url, download: filename, class: 'visually-hidden' }, filename);
  document.body.append(a);
  a.click();
  setTimeout(() => { URL.revokeObjectURL(url); a.remove(); }, 60_000);
}

function downloadButton(label, makeText, filename, type) {
  return h('button', { type: 'button', onclick: () => { downloadBlob(new Blob([makeText()], { type }), filename); announce(`${filename} downloaded.`); } }, label);
}

// ---- Usage ----------------------------------------------------------------

function renderUsageSection(section, account, p, signal) {
  const gran = p.granularity === 'month' ? 'month' : 'day';
  const form = h('form', { class: 'filters', 'aria-label': 'Usage' },
    field('Granularity', select('granularity', [['day', 'Per day'], ['month', 'Per month']], gran)),
    field('From day (UTC, inclusive)', textInput('usage_from', p.usage_from, { class: 'mono-input', placeholder: 'YYYY-MM-DD' })),
    field('To day (UTC, exclusive)', textInput('usage_to', p.usage_to, { class: 'mono-input', placeholder: 'YYYY-MM-DD' })),
    h('button', { type: 'submit' }, 'Show usage'));
  form.addEventListener('submit', (e) => {
    e.preventDefault();
    const d = Object.fromEntries(new FormData(form));
    navigate(viewUrl('account', { ...p, granularity: d.granularity, usage_from: d.usage_from.trim() || undefined, usage_to: d.usage_to.trim() || undefined }));
  });
  const out = h('div', {}, h('p', { class: 'muted' }, 'Loading usage…'));
  section.append(form, h('p', { class: 'hint' }, 'Usage debits per meter, on the day they occurred (reversals net out).'), out);
  api(`/v1/accounts/${enc(account)}/usage${qs({ granularity: gran, from: p.usage_from, to: p.usage_to })}`, { signal })
    .then((u) => renderUsage(out, u), (e) => showError(out, e, 'usage'));
}

function renderUsage(out, u) {
  clear(out);
  if (!u.usage.length) { out.append(h('p', {}, 'No usage in this range.')); return; }
  const groups = new Map();
  for (const r of u.usage) {
    const k = `${r.meter ?? '(no meter)'}\u0000${r.unit}`;
    if (!groups.has(k)) groups.set(k, { meter: r.meter ?? '(no meter)', unit: r.unit, rows: [] });
    groups.get(k).rows.push(r);
  }
  const charts = h('div', { class: 'charts' });
  let i = 0;
  for (const g of groups.values()) { charts.append(usageChart(g, u.granularity, i)); i += 1; }
  out.append(charts);
  if (u.current_as_of_seq < u.head_seq) {
    out.append(h('p', { class: 'hint' }, `Summaries are complete up to seq ${u.current_as_of_seq}; the log is at ${u.head_seq}.`));
  }
  out.append(table({
    caption: 'Usage data',
    columns: [{ label: u.granularity === 'month' ? 'Month' : 'Day' }, { label: 'Meter' }, { label: 'Quantity', num: true },
      { label: 'Amount', num: true }, { label: 'Entries', num: true }],
    rows: u.usage.map((r) => h('tr', {}, h('td', { class: 'mono' }, r.period), h('td', {}, r.meter ?? '(no meter)'),
      h('td', { class: 'num amount' }, r.quantity), h('td', { class: 'num' }, money(r.amount, r.unit)), h('td', { class: 'num' }, String(r.entries)))),
  }));
}

// A bar chart per meter: values printed on each bar, so no colour is needed.
function usageChart(g, granularity, index) {
  const rows = [...g.rows].sort((a, b) => (a.period < b.period ? -1 : 1));
  const longest = Math.max(...rows.map((r) => Math.max(r.amount.length, `${r.quantity} qty`.length, r.period.length)));
  const barW = Math.max(46, Math.ceil(longest * 6.4)); const gap = 12; const top = 24; const plotH = 140; const left = 8; const bottom = 34;
  const width = Math.max(220, left * 2 + rows.length * (barW + gap));
  const height = top + plotH + bottom;
  // Geometry only: floats never reach a displayed figure.
  const vals = rows.map((r) => Math.max(0, Number(r.amount)));
  const max = Math.max(...vals, 0) || 1;
  const titleId = `chart-title-${index}`; const descId = `chart-desc-${index}`;
  const svg = s('svg', { class: 'bars', width, height, viewBox: `0 0 ${width} ${height}`, role: 'img', 'aria-labelledby': `${titleId} ${descId}` },
    s('title', { id: titleId }, `Usage amount of ${g.meter} per ${granularity} in ${g.unit}`),
    s('desc', { id: descId }, rows.map((r) => `${r.period}: ${r.amount} ${r.unit}`).join('; ')),
    s('line', { class: 'grid', x1: 0, x2: width, y1: top, y2: top }),
    s('line', { class: 'axis', x1: 0, x2: width, y1: top + plotH, y2: top + plotH }));
  rows.forEach((r, i) => {
    const x = left + i * (barW + gap);
    const bh = Math.max(1, (vals[i] / max) * plotH);
    const y = top + plotH - bh;
    svg.append(
      s('rect', { class: 'bar', x, y, width: barW, height: bh }),
      s('text', { class: 'value', x: x + barW / 2, y: y - 4, 'text-anchor': 'middle' }, r.amount),
      s('text', { x: x + barW / 2, y: top + plotH + 14, 'text-anchor': 'middle' }, granularity === 'month' ? r.period : r.period.slice(5)),
      s('text', { x: x + barW / 2, y: top + plotH + 27, 'text-anchor': 'middle' }, `${r.quantity} qty`));
  });
  return h('figure', { class: 'chart' }, h('figcaption', {}, `${g.meter} (${g.unit})`), svg);
}

// ---- Settings and their history ---------------------------------------------

async function renderSettings(section, a, signal) {
  const heading = section.querySelector('h2');
  fill(section, heading, kvList([
    ['Unit', a.unit],
    ['Overdraft', overdraftText(a.overdraft)],
    ['Low-balance alert', a.alerts?.low_balance != null ? money(String(a.alerts.low_balance), a.unit, { signed: true }) : 'none'],
    ['Metadata', a.metadata && Object.keys(a.metadata).length ? jsonBlock(a.metadata) : 'none'],
    ['Settings version', String(a.settings_version)],
    ['Set by entry', a.settings_entry_id ? entryLink(a.settings_entry_id) : 'never set'],
  ]));
  const out = h('div', {}, h('p', { class: 'muted' }, 'Loading the settings history…'));
  section.append(h('h3', {}, 'History'), out);
  try {
    const entries = await collectEntries({ account: a.account, kind: 'account_settings' }, signal, 10);
    fill(out, table({
      caption: `Settings history of ${a.account}`,
      columns: [{ label: 'Version' }, { label: 'Recorded (UTC)' }, { label: 'Overdraft' }, { label: 'Low-balance alert' }, { label: 'Metadata' }, { label: 'Entry' }],
      rows: entries.length ? entries.slice().reverse().map((e) => h('tr', {},
        h('td', { class: 'mono' }, e.upstream_id.split('#').pop()),
        h('td', {}, when(e.recorded_at)),
        h('td', {}, overdraftText(e.overdraft)),
        h('td', {}, e.alerts?.low_balance != null ? money(String(e.alerts.low_balance), e.unit, { signed: true }) : 'none'),
        h('td', {}, e.metadata ? h('code', {}, JSON.stringify(e.metadata)) : 'none'),
        h('td', {}, entryLink(e.id, `seq ${e.seq}`))))
        : [h('tr', {}, h('td', { colspan: 6 }, 'The settings were never set (defaults apply).'))],
    }));
  } catch (e) { showError(out, e, 'the settings history'); }
}

function overdraftText(o) {
  if (o === undefined || o === null) return 'allow (default)';
  if (typeof o === 'string') return o;
  if (o.limit !== undefined) return `limit ${o.limit} (available may go down to \u2212${o.limit})`;
  return JSON.stringify(o);
}

async function collectEntries(filters, signal, maxPages) {
  const all = [];
  let after = 0;
  for (let i = 0; i < maxPages; i += 1) {
    const page = await api(`/v1/entries${qs({ ...filters, after_seq: after, limit: 1000 })}`, { signal });
    all.push(...page.entries);
    if (page.next_after_seq === null || page.next_after_seq === undefined) break;
    after = page.next_after_seq;
  }
  return all;
}

// ===========================================================================
// Entries explorer
// ===========================================================================

const KINDS = ['usage_debit', 'payment', 'account_settings', 'hold', 'hold_capture', 'hold_release', 'refund', 'reversal', 'adjustment'];
const ENTRY_FILTERS = ['kind', 'status', 'account', 'from', 'to', 'upstream_id', 'limit'];

views.entries = async (main, p, signal) => {
  pageTitle(main, 'Entries');
  const form = h('form', { class: 'filters', 'aria-label': 'Entry filters' },
    field('Kind', select('kind', [['', 'Any kind'], ...KINDS.map((k) => [k, k])], p.kind)),
    field('Status', select('status', [['', 'Any status'], ['posted', 'posted'], ['rejected', 'rejected']], p.status)),
    field('Account', textInput('account', p.account, { class: 'mono-input' })),
    field('Recorded from (UTC)', textInput('from', p.from, { class: 'mono-input', placeholder: 'e.g. 2026-11-01T00:00:00Z' })),
    field('Recorded before (UTC)', textInput('to', p.to, { class: 'mono-input', placeholder: 'e.g. 2026-12-01T00:00:00Z' })),
    field('Upstream ID', textInput('upstream_id', p.upstream_id, { class: 'mono-input' })),
    field('Page size', select('limit', [['50', '50'], ['100', '100'], ['500', '500'], ['1000', '1000']], p.limit || '100')),
    h('button', { type: 'submit' }, 'Apply filters'),
    link('entries', {}, 'Clear'));
  form.addEventListener('submit', (e) => { e.preventDefault(); submitTo('entries', form); });
  const out = h('div', {}, h('p', { class: 'muted' }, 'Loading entries…'));
  main.append(form, out);
  const filters = Object.fromEntries(ENTRY_FILTERS.map((k) => [k, p[k]]));
  let page;
  try {
    page = await api(`/v1/entries${qs({ ...filters, limit: p.limit || 100, after_seq: p.after_seq })}`, { signal });
  } catch (e) { showError(out, e, 'entries'); return; }
  fill(out, table({
    caption: 'Entries',
    hint: `${page.entries.length} on this page, in seq order${p.after_seq ? ` after seq ${p.after_seq}` : ''}.`,
    columns: [{ label: 'Seq', num: true }, { label: 'Recorded (UTC)' }, { label: 'Kind' }, { label: 'Status' }, { label: 'Account' },
      { label: 'Debit account' }, { label: 'Credit account' }, { label: 'Amount', num: true }, { label: 'Upstream ID' }],
    rows: page.entries.length ? page.entries.map((e) => h('tr', { class: e.status === 'rejected' ? 'rejected' : null },
      h('td', { class: 'num mono' }, entryLink(e.id, String(e.seq))),
      h('td', {}, when(e.recorded_at)),
      h('td', {}, e.kind),
      h('td', { class: 'status' }, statusBadge(e)),
      h('td', {}, accountLink(e.account)),
      h('td', { class: 'mono' }, e.debit_account),
      h('td', { class: 'mono' }, e.credit_account),
      h('td', { class: 'num' }, money(e.amount, e.unit)),
      h('td', { class: 'mono' }, e.upstream_id)))
      : [h('tr', {}, h('td', { colspan: 9 }, 'No entries match these filters.'))],
  }));
  const pager = h('nav', { class: 'pager', 'aria-label': 'Entry pages' });
  if (p.after_seq) pager.append(link('entries', filters, 'First page'));
  if (page.next_after_seq !== null && page.next_after_seq !== undefined) pager.append(link('entries', { ...filters, after_seq: page.next_after_seq }, 'Next page'));
  else pager.append(h('span', { class: 'muted' }, 'Last page.'));
  out.append(pager);
  announce(`${page.entries.length} entries shown.`);
};

// ===========================================================================
// Entry page
// ===========================================================================

const ENTRY_FIELD_ORDER = ['id', 'seq', 'kind', 'status', 'upstream_id', 'account', 'debit_account', 'credit_account', 'amount', 'unit',
  'meter', 'quantity', 'processor', 'occurred_at', 'recorded_at', 'balance_after', 'metadata', 'rejection', 'fingerprint', 'prev_hash', 'hash'];
const TIME_FIELDS = new Set(['occurred_at', 'recorded_at', 'expires_at']);
const AMOUNT_FIELDS = new Set(['amount', 'balance_after']);
const ENTRY_ID_FIELDS = new Set(['id', 'entry_id', 'reversed_by']);

function entryFieldValue(e, k) {
  const v = e[k];
  if (v === null || v === undefined) return h('span', { class: 'muted' }, 'null');
  if (TIME_FIELDS.has(k)) return when(v);
  if (AMOUNT_FIELDS.has(k)) return money(v, e.unit, { signed: k === 'balance_after' });
  if (ENTRY_ID_FIELDS.has(k) && k !== 'id') return entryLink(v);
  if (k === 'account' || k === 'debit_account' || k === 'credit_account' || k === 'counter_account') return accountLink(v);
  if (typeof v === 'object') return jsonBlock(v);
  return h('span', { class: k.endsWith('hash') || k === 'fingerprint' || k === 'id' ? 'hash' : 'mono' }, String(v));
}

views.entry = async (main, p, signal) => {
  if (!p.id) { pageTitle(main, 'Entry'); main.append(message('warn', h('p', {}, 'No entry ID given.'))); return; }
  pageTitle(main, 'Entry ', h('span', { class: 'mono' }, p.id));
  const out = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(out);
  let e;
  try { e = await api(`/v1/entries/${enc(p.id)}`, { signal }); } catch (err) { showError(out, err, 'this entry'); return; }
  clear(out);
  out.append(h('p', {}, `Seq ${e.seq} \u00b7 ${e.kind} \u00b7 `, statusBadge(e), ' \u00b7 ', money(e.amount, e.unit), ' \u00b7 account ', accountLink(e.account)));
  if (e.rejection) {
    out.append(message('warn', h('p', {}, h('strong', {}, 'Rejected: '), h('code', {}, e.rejection.code)), h('p', {}, e.rejection.message),
      h('p', { class: 'hint' }, 'The stored rejection: the ledger rule that refused this request. It moved no money.')));
  }
  const chain = h('section', { 'aria-labelledby': 'h-chain' }, h('h2', { id: 'h-chain' }, 'Chain neighbours'), h('p', { class: 'muted' }, 'Loading…'));
  const related = h('section', { 'aria-labelledby': 'h-related' }, h('h2', { id: 'h-related' }, 'Related entries'));
  const keys = [...ENTRY_FIELD_ORDER.filter((k) => k in e), ...Object.keys(e).filter((k) => !ENTRY_FIELD_ORDER.includes(k)).sort()];
  out.append(chain, related,
    h('section', { 'aria-labelledby': 'h-fields' }, h('h2', { id: 'h-fields' }, 'All fields'), kvList(keys.map((k) => [k, entryFieldValue(e, k)]))));
  renderChain(chain, e, signal);
  renderRelated(related, e, signal);
};

async function renderChain(section, e, signal) {
  const heading = section.querySelector('h2');
  let page;
  try {
    page = await api(`/v1/entries${qs({ after_seq: Math.max(0, e.seq - 2), limit: e.seq === 1 ? 2 : 3 })}`, { signal });
  } catch (err) { showErrorKeepHeading(section, err, 'the chain neighbours'); return; }
  const prev = page.entries.find((x) => x.seq === e.seq - 1);
  const next = page.entries.find((x) => x.seq === e.seq + 1);
  const linkOk = (ok) => h('span', { class: `check ${ok ? 'ok' : 'bad'}` }, ok ? '\u2713 links' : '\u2717 does not link');
  const box = (title, x, extra, cls) => h('div', { class: cls },
    h('h3', {}, title),
    x ? [h('p', {}, entryLink(x.id, `seq ${x.seq}: ${x.kind}`)), kvList([['hash', h('span', { class: 'hash' }, x.hash)], ...extra])]
      : h('p', { class: 'muted' }, title.startsWith('Previous') ? 'None: this is the first entry (prev_hash is 64 zeros).' : 'None yet: this is the head.'));
  fill(section, heading, h('div', { class: 'chain' },
    box('Previous entry', prev, prev ? [['this entry\u2019s prev_hash', linkOk(prev.hash === e.prev_hash)]] : []),
    box('This entry', e, [['prev_hash', h('span', { class: 'hash' }, e.prev_hash)]], 'current'),
    box('Next entry', next, next ? [['its prev_hash', linkOk(next.prev_hash === e.hash)]] : [])));
  const nav = h('nav', { class: 'pager', 'aria-label': 'Chain' });
  if (prev) nav.append(h('a', { href: viewUrl('entry', { id: prev.id }), rel: 'prev' }, `\u2190 Previous entry (seq ${prev.seq})`));
  if (next) nav.append(h('a', { href: viewUrl('entry', { id: next.id }), rel: 'next' }, `Next entry (seq ${next.seq}) \u2192`));
  section.append(nav);
}

async function renderRelated(section, e, signal) {
  const items = [];
  if (e.reversed_by) items.push(h('li', {}, 'Reversed by ', entryLink(e.reversed_by)));
  if (e.kind === 'reversal' && e.entry_id) items.push(h('li', {}, 'Reverses ', entryLink(e.entry_id)));
  if (e.kind === 'refund' && e.payment_id) {
    items.push(h('li', {}, 'Refunds payment ', link('entries', { kind: 'payment', account: e.account, upstream_id: e.payment_id }, h('span', { class: 'mono' }, e.payment_id))));
  }
  if (e.kind?.startsWith('intent_') && e.upstream_id) {
    // An intent's outcome has the intent ID as upstream ID; a claim or release has `<intent_id>#<fence>`.
    const intentId = e.kind === 'intent_claimed' || e.kind === 'intent_released' ? e.upstream_id.replace(/#\d+$/, '') : e.upstream_id;
    items.push(h('li', {}, 'A change of intent ', link('intent', { id: intentId }, h('span', { class: 'mono' }, intentId))));
  }
  if (e.hold_id && e.kind !== 'hold') items.push(h('li', {}, 'Hold ', link('entries', { kind: 'hold', upstream_id: e.hold_id }, h('span', { class: 'mono' }, e.hold_id))));
  const list = h('ul', {}, items);
  section.append(list);
  if (e.kind === 'payment' && e.status === 'posted') {
    const li = h('li', { class: 'muted' }, 'Looking for refunds…');
    list.append(li);
    try {
      const refunds = (await collectEntries({ kind: 'refund', account: e.account }, signal, 20)).filter((r) => r.payment_id === e.upstream_id);
      clear(li).classList.remove('muted');
      if (refunds.length) {
        append(li, ['Refunded by: ', refunds.map((r, i) => [i ? ', ' : '', entryLink(r.id), ' (', money(r.amount, r.unit), r.status === 'rejected' ? ', rejected' : '', ')'])]);
      } else li.append('Not refunded.');
    } catch (err) { const m = errorMessage(err, 'the refunds'); if (m) fill(li, m); }
  }
  if (!list.children.length) section.append(h('p', { class: 'muted' }, 'Nothing reversed, refunded or reverses this entry.'));
}

// ===========================================================================
// Intents: list and one intent with its history
// ===========================================================================

const INTENT_STATUSES = ['claimed', 'released', 'succeeded', 'failed'];
const INTENT_FILTERS = ['status', 'action', 'limit'];
// A filtered page is filled by following next_after, at most this many reads.
const INTENT_MAX_READS = 10;

function intentLink(id) { return link('intent', { id }, h('span', { class: 'mono' }, id)); }
function intentBadge(status) { return h('span', { class: `badge intent-${status}` }, status); }

views.intents = async (main, p, signal) => {
  pageTitle(main, 'Intents');
  const limit = p.limit || '100';
  const form = h('form', { class: 'filters', 'aria-label': 'Intent filters' },
    field('Status', select('status', [['', 'Any status'], ...INTENT_STATUSES.map((x) => [x, x])], p.status)),
    field('Action', textInput('action', p.action, { class: 'mono-input', placeholder: 'e.g. invoice.charge' })),
    field('Page size', select('limit', [['50', '50'], ['100', '100'], ['500', '500'], ['1000', '1000']], limit)),
    h('button', { type: 'submit' }, 'Apply filters'),
    link('intents', {}, 'Clear'));
  form.addEventListener('submit', (e) => { e.preventDefault(); submitTo('intents', form); });
  const openForm = h('form', { class: 'inline', 'aria-label': 'Open an intent' },
    field('Open intent by ID', textInput('id', '', { class: 'mono-input' })),
    h('button', { type: 'submit', class: 'secondary' }, 'Open'));
  openForm.addEventListener('submit', (e) => {
    e.preventDefault();
    const id = new FormData(openForm).get('id')?.toString().trim();
    if (id) navigate(viewUrl('intent', { id }));
  });
  const out = h('div', {}, h('p', { class: 'muted' }, 'Loading intents…'));
  main.append(form, openForm, out);
  const filters = Object.fromEntries(INTENT_FILTERS.map((k) => [k, p[k]]));
  // The server reads `limit` intents a page and drops those the filters skip:
  // follow next_after, asking for what is missing, until the page is full.
  const want = Number(limit) || 100;
  const intents = [];
  let after = p.after;
  let next = null;
  let reads = 0;
  try {
    for (;;) {
      const page = await api(`/v1/intents${qs({ status: p.status, action: p.action, after, limit: want - intents.length })}`, { signal });
      reads += 1;
      intents.push(...page.intents);
      next = page.next_after ?? null;
      if (next === null || intents.length >= want || reads >= INTENT_MAX_READS) break;
      after = next;
    }
  } catch (e) { showError(out, e, 'intents'); return; }
  const short = next !== null && intents.length < want;
  fill(out, table({
    caption: 'Intents',
    hint: `${intents.length} on this page, in intent ID order${p.after ? ` after ${p.after}` : ''}.${short ? ' The filters skipped many intents: the next page goes on looking.' : ''}`,
    columns: [{ label: 'Intent ID' }, { label: 'Action' }, { label: 'Status' }, { label: 'Attempt', num: true }, { label: 'Updated (UTC)' }],
    rows: intents.length ? intents.map((x) => h('tr', {},
      h('th', { scope: 'row' }, intentLink(x.intent_id)),
      h('td', { class: 'mono' }, x.action),
      h('td', { class: 'status' }, intentBadge(x.status), x.error ? h('span', { class: 'mono' }, ` ${x.error.code}`) : null),
      h('td', { class: 'num mono' }, `${x.attempt} / ${x.max_attempts}`),
      h('td', {}, when(x.updated_at))))
      : [h('tr', {}, h('td', { colspan: 5 }, short ? 'No intents on this page match these filters; the next page goes on looking.' : 'No intents match these filters.'))],
  }));
  const pager = h('nav', { class: 'pager', 'aria-label': 'Intent pages' });
  if (p.after) pager.append(link('intents', filters, 'First page'));
  if (next !== null) pager.append(link('intents', { ...filters, after: next }, 'Next page'));
  else pager.append(h('span', { class: 'muted' }, 'Last page.'));
  out.append(pager);
  announce(`${intents.length} intents shown.`);
};

views.intent = async (main, p, signal) => {
  if (!p.id) { pageTitle(main, 'Intent'); main.append(message('warn', h('p', {}, 'No intent ID given. '), link('intents', {}, 'Find one in the intent list.'))); return; }
  pageTitle(main, 'Intent ', h('span', { class: 'mono' }, p.id));
  const out = h('div', {}, h('p', { class: 'muted' }, 'Loading…'));
  main.append(out);
  let x;
  try { x = await api(`/v1/intents/${enc(p.id)}`, { signal }); } catch (err) { showError(out, err, 'this intent'); return; }
  clear(out);
  out.append(h('p', {}, h('span', { class: 'mono' }, x.action), ' \u00b7 ', intentBadge(x.status), ` \u00b7 attempt ${x.attempt} of ${x.max_attempts} \u00b7 fence ${x.fence}`));
  if (x.error) {
    out.append(message(x.status === 'failed' ? 'error' : 'warn',
      h('p', {}, h('strong', {}, x.status === 'failed' ? 'Failed: ' : 'Last attempt released: '), h('code', { id: 'intent-error-code' }, x.error.code)),
      h('p', { id: 'intent-error-message' }, x.error.message)));
  }
  const history = x.history ?? [];
  out.append(
    h('section', { 'aria-labelledby': 'h-intent-state' }, h('h2', { id: 'h-intent-state' }, 'State'), kvList([
      ['Intent ID', h('span', { class: 'mono' }, x.intent_id)],
      ['Action', h('span', { class: 'mono' }, x.action)],
      ['Status', intentBadge(x.status)],
      ['Attempt', h('span', { class: 'mono' }, `${x.attempt} of ${x.max_attempts}`)],
      ['Fence', h('span', { class: 'mono', id: 'intent-fence' }, String(x.fence))],
      ['Lease expires', x.lease_expires_at ? when(x.lease_expires_at) : h('span', { class: 'muted' }, 'no live lease')],
      ['Created', when(x.created_at)],
      ['Updated', when(x.updated_at)],
    ])),
    h('section', { 'aria-labelledby': 'h-intent-params' }, h('h2', { id: 'h-intent-params' }, 'Parameters'), jsonBlock(x.params)),
    h('section', { 'aria-labelledby': 'h-intent-outcome' }, h('h2', { id: 'h-intent-outcome' }, 'Outcome'),
      x.status === 'succeeded' ? [h('h3', {}, 'Result'), jsonBlock(x.result ?? null)]
        : x.status === 'failed' && x.error ? kvList([['Error code', h('code', {}, x.error.code)], ['Error message', x.error.message]])
          : h('p', { class: 'muted' }, x.status === 'claimed' ? 'None yet: a worker holds the lease.' : 'None yet: the next claim starts another attempt.')),
    h('section', { 'aria-labelledby': 'h-intent-history' }, h('h2', { id: 'h-intent-history' }, 'History'),
      table({
        caption: `History of ${x.intent_id} (${history.length} changes)`,
        hint: 'Every change of state is an entry of the hash-chained log, oldest first. Heartbeats are not logged.',
        columns: [{ label: 'Change' }, { label: 'At (UTC)' }, { label: 'Fence', num: true }, { label: 'Attempt', num: true },
          { label: 'Seq', num: true }, { label: 'Entry' }],
        rows: history.length ? history.map((c) => h('tr', {},
          h('td', {}, intentBadge(c.type)),
          h('td', {}, when(c.at)),
          h('td', { class: 'num mono' }, String(c.fence)),
          h('td', { class: 'num mono' }, String(c.attempt)),
          h('td', { class: 'num mono' }, String(c.seq)),
          h('td', {}, entryLink(c.entry_id))))
          : [h('tr', {}, h('td', { colspan: 6 }, 'No logged changes.'))],
        className: 'intent-history',
      })));
  announce(`Intent ${x.intent_id}: ${x.status}.`);
};

// ===========================================================================
// Stripe: the events the Stripe integration received, and their reapply
// ===========================================================================

const STRIPE_STATUSES = ['unmapped', 'applied', 'ignored'];
const STRIPE_FILTERS = ['status', 'limit'];
// The unmapped events are counted up to this many (one read).
const STRIPE_COUNT_LIMIT = 1000;

function stripeBadge(status) { return h('span', { class: `badge stripe-${status}` }, status); }

views.stripe = async (main, p, signal) => {
  pageTitle(main, 'Stripe events');
  const limit = p.limit || '100';
  const form = h('form', { class: 'filters', 'aria-label': 'Stripe event filters' },
    field('Status', select('status', [['', 'Any status'], ...STRIPE_STATUSES.map((x) => [x, x])], p.status)),
    field('Page size', select('limit', [['50', '50'], ['100', '100'], ['500', '500'], ['1000', '1000']], limit)),
    h('button', { type: 'submit' }, 'Apply filters'),
    link('stripe', {}, 'Clear'));
  form.addEventListener('submit', (e) => { e.preventDefault(); submitTo('stripe', form); });
  const summary = h('div', { id: 'stripe-summary' }, h('p', { class: 'muted' }, 'Counting unmapped events…'));
  const notice = h('div', { id: 'stripe-notice', 'aria-live': 'polite' });
  const out = h('div', {}, h('p', { class: 'muted' }, 'Loading Stripe events…'));
  main.append(h('p', { class: 'hint' },
    'Events Stripe delivered to this tenant’s Stripe integration, in event ID order. A payment becomes a payment entry, a refund a refund entry; other types are ignored. ',
    'An unmapped event could not be mapped (the reason says why): fix the mapping, then reapply it (a key with the post scope). ',
    'A refund that came before its payment waits for it and is applied when the payment arrives.'),
  form, summary, notice, out);
  const filters = Object.fromEntries(STRIPE_FILTERS.map((k) => [k, p[k]]));
  const refreshCount = () => renderUnmappedCount(summary, p, signal);
  refreshCount();
  let page;
  try {
    page = await api(`/v1/integrations/stripe/events${qs({ status: p.status, after: p.after, limit })}`, { signal });
  } catch (e) { showError(out, e, 'the Stripe events'); return; }
  const events = page.events;
  const next = page.next_after ?? null;
  const onReapplied = () => refreshCount();
  fill(out, table({
    caption: p.status ? `Stripe events: ${p.status}` : 'Stripe events',
    hint: `${events.length} on this page, in event ID order${p.after ? ` after ${p.after}` : ''}. Unmapped events are highlighted.`,
    columns: [{ label: 'Event ID' }, { label: 'Type' }, { label: 'Status' }, { label: 'Reason' }, { label: 'Waiting for' },
      { label: 'Received (UTC)' }, { label: 'Updated (UTC)' }, { label: 'Action' }],
    rows: events.length ? events.map((x) => stripeRow(x, notice, onReapplied))
      : [h('tr', {}, h('td', { colspan: 8 }, p.status ? `No ${p.status} Stripe events.` : 'No Stripe events yet: they appear here once Stripe delivers to the integration’s endpoint path.'))],
    className: 'stripe-events',
  }));
  const pager = h('nav', { class: 'pager', 'aria-label': 'Stripe event pages' });
  if (p.after) pager.append(link('stripe', filters, 'First page'));
  if (next !== null) pager.append(link('stripe', { ...filters, after: next }, 'Next page'));
  else pager.append(h('span', { class: 'muted' }, 'Last page.'));
  out.append(pager);
  announce(`${events.length} Stripe events shown.`);
};

/** The count of unmapped events, highlighted, with a link to them. */
async function renderUnmappedCount(summary, p, signal) {
  let page;
  try {
    page = await api(`/v1/integrations/stripe/events${qs({ status: 'unmapped', limit: STRIPE_COUNT_LIMIT })}`, { signal });
  } catch (e) { const m = errorMessage(e, 'the count of unmapped events'); if (m) fill(summary, m); return; }
  const n = page.events.length;
  const more = page.next_after !== null && page.next_after !== undefined;
  if (n === 0) {
    fill(summary, message('ok', h('p', {}, h('strong', {}, 'No unmapped events: '), 'every event received was applied or ignored.')));
    return;
  }
  const count = more ? `${STRIPE_COUNT_LIMIT.toLocaleString('en')} or more` : String(n);
  fill(summary, message('warn',
    h('p', {}, h('strong', {}, h('span', { id: 'stripe-unmapped-count' }, count), n === 1 && !more ? ' unmapped event' : ' unmapped events'),
      ' could not be mapped to ledger entries.'),
    p.status === 'unmapped' ? null : h('p', {}, link('stripe', { status: 'unmapped' }, 'Show only the unmapped events'))));
}

function stripeRow(x, notice, onReapplied) {
  const row = h('tr', { class: x.status === 'unmapped' ? 'unmapped' : null });
  const cells = (ev) => [
    h('th', { scope: 'row', class: 'mono' }, ev.event_id),
    h('td', { class: 'mono' }, ev.type),
    h('td', { class: 'status' }, stripeBadge(ev.status)),
    h('td', {}, ev.reason ?? h('span', { class: 'muted' }, '—')),
    h('td', { class: 'mono' }, ev.waiting_for ?? h('span', { class: 'muted' }, '—')),
    h('td', {}, when(ev.received_at)),
    h('td', {}, when(ev.updated_at)),
    h('td', {}, ev.status === 'unmapped' ? reapplyButton(ev, row, notice, onReapplied, cells) : h('span', { class: 'muted' }, '—')),
  ];
  return append(row, cells(x));
}

function reapplyButton(ev, row, notice, onReapplied, cells) {
  const button = h('button', { type: 'button', class: 'secondary', 'aria-label': `Reapply ${ev.event_id}` }, 'Reapply');
  button.addEventListener('click', async () => {
    button.disabled = true;
    fill(notice, h('p', { class: 'progress', role: 'status' }, `Reapplying ${ev.event_id}…`));
    let now;
    try {
      now = await api(`/v1/integrations/stripe/events/${enc(ev.event_id)}/reapply`, { method: 'POST' });
    } catch (err) {
      button.disabled = false;
      const m = errorMessage(err, `event ${ev.event_id}`, { verb: 'reapply', forbidden: `event ${ev.event_id} cannot be reapplied` });
      if (m) fill(notice, m); else clear(notice);
      return;
    }
    fill(row, cells(now));
    if (now.status === 'unmapped') row.classList.add('unmapped'); else row.classList.remove('unmapped');
    fill(notice, now.status === 'unmapped'
      ? message('warn', h('p', {}, `Reapplied ${now.event_id}: still `, stripeBadge(now.status), ': ', now.reason ?? 'no reason given', '.'))
      : message('ok', h('p', {}, `Reapplied ${now.event_id}: now `, stripeBadge(now.status), '.')));
    announce(`Event ${now.event_id} reapplied: ${now.status}.`);
    onReapplied();
  });
  return button;
}

// ===========================================================================
// Audit page
// ===========================================================================

const VERIFY_TIMEOUT_MS = 60_000;

views.audit = async (main, p, signal) => {
  pageTitle(main, 'Audit');
  if (session.lacksAudit()) {
    main.append(lacksAuditMessage(), h('button', { type: 'button', class: 'secondary', onclick: () => { sessionStorage.removeItem(NO_AUDIT_STORAGE); render(); } }, 'Check the key again'));
    return;
  }
  const head = h('section', { 'aria-labelledby': 'h-head' }, h('h2', { id: 'h-head' }, 'Signed chain head'), h('p', { class: 'muted' }, 'Loading…'));
  main.append(head);
  let hv;
  try { hv = await api('/v1/audit/head', { signal }); } catch (err) {
    if (err instanceof ApiError && err.status === 403) { clear(main); pageTitle(main, 'Audit'); main.append(lacksAuditMessage()); return; }
    showErrorKeepHeading(head, err, 'the signed head');
    return;
  }
  renderHead(head, hv);
  main.append(verifySection(), exportSection(hv));
};

function lacksAuditMessage() {
  return message('error', h('p', {}, h('strong', {}, 'This key lacks the '), h('code', {}, 'audit'), h('strong', {}, ' scope.')),
    h('p', {}, 'The signed head, the chain verification and the exports need a key with the audit scope. Sign out and sign in with such a key to use this page.'));
}

function renderHead(section, hv) {
  const heading = section.querySelector('h2');
  const sig = hv.signature;
  fill(section, heading, kvList([
    ['Tenant', hv.tenant],
    ['Seq', h('span', { class: 'mono', id: 'head-seq' }, String(hv.seq))],
    ['Hash', h('span', { class: 'hash' }, hv.hash)],
    ['Checked at', when(hv.checked_at)],
    ['Signing', hv.signing],
    sig ? ['Algorithm', sig.algorithm] : null,
    sig ? ['Public key', h('span', { class: 'hash' }, sig.public_key)] : null,
    sig ? ['Signature', h('span', { class: 'hash' }, sig.value)] : null,
    sig ? ['Signed at', when(sig.signed_at)] : null,
    sig ? ['Signed message', h('code', { class: 'hash' }, sig.message)] : null,
  ]), hv.notice ? message('warn', h('p', {}, hv.notice)) : null);
}

function verifySection() {
  const out = h('div', { 'aria-live': 'polite' });
  const run = h('button', { type: 'button' }, 'Verify the chain on the server');
  const cancel = h('button', { type: 'button', class: 'secondary', disabled: true }, 'Cancel verification');
  let ctl = null;
  run.addEventListener('click', async () => {
    ctl = new AbortController();
    const started = performance.now();
    let timedOut = false;
    const timer = setTimeout(() => { timedOut = true; ctl.abort(); }, VERIFY_TIMEOUT_MS);
    const onNav = () => ctl?.abort();
    routeAbort.signal.addEventListener('abort', onNav, { once: true });
    run.disabled = true; cancel.disabled = false;
    const progress = h('p', { class: 'progress', role: 'status' }, 'Verifying… 0 s');
    const tick = setInterval(() => { progress.textContent = `Verifying… ${Math.round((performance.now() - started) / 1000)} s`; }, 1000);
    fill(out, progress);
    try {
      const report = await api('/v1/audit/verify', { method: 'POST', signal: ctl.signal });
      renderVerifyReport(out, report);
      announce(`Verification ${report.status}.`);
    } catch (err) {
      if (err?.name === 'AbortError') {
        fill(out, message('warn', h('p', {}, timedOut ? `Verification stopped: no answer within ${VERIFY_TIMEOUT_MS / 1000} s.` : 'Verification cancelled.')));
      } else {
        const m = errorMessage(err, 'the verification');
        if (m) fill(out, m);
      }
    } finally {
      clearTimeout(timer); clearInterval(tick);
      routeAbort.signal.removeEventListener('abort', onNav);
      run.disabled = false; cancel.disabled = true; ctl = null;
    }
  });
  cancel.addEventListener('click', () => ctl?.abort());
  return h('section', { 'aria-labelledby': 'h-verify' }, h('h2', { id: 'h-verify' }, 'Verify the chain'),
    h('p', { class: 'hint' }, 'Recomputes this tenant\u2019s hash chain and balances on the server, within the server\u2019s time budget.'),
    h('div', { class: 'buttons' }, run, cancel), out);
}

function renderVerifyReport(out, r) {
  fill(out, 
    h('p', {}, 'Result: ', h('span', { class: `badge ${r.status}`, id: 'verify-status' }, r.status)),
    kvList([
      ['Tenant', r.tenant],
      ['Entries checked', String(r.checked_entries)],
      ['Head', r.head ? [h('span', { class: 'mono' }, `seq ${r.head.seq} `), h('span', { class: 'hash' }, r.head.hash)] : '—'],
      ['Balances checked', String(r.balances)],
      ['Records checked', String(r.records)],
      ['Time', `${r.elapsed_ms} ms of a ${r.budget_ms} ms budget`],
    ]),
    r.status === 'incomplete' ? message('warn', h('p', {}, 'The verification ran out of time before the end of the chain; what it checked held unless problems are listed.')) : null,
    table({
      caption: `Problems (${r.problems?.length ?? 0})`,
      columns: [{ label: 'Seq' }, { label: 'Problem' }],
      rows: r.problems?.length ? r.problems.map((x) => h('tr', {}, h('td', { class: 'mono' }, x.seq ?? '—'), h('td', {}, x.problem)))
        : [h('tr', {}, h('td', { colspan: 2 }, 'None.'))],
    }));
}

function exportSection(hv) {
  const fromIn = textInput('from_seq', '1', { class: 'mono-input', inputmode: 'numeric' });
  const toIn = textInput('to_seq', String(hv.seq), { class: 'mono-input', inputmode: 'numeric' });
  const status = h('div', { 'aria-live': 'polite' });
  const btn = (format, label) => h('button', { type: 'button', onclick: () => runExport(format, fromIn.value.trim(), toIn.value.trim(), status) }, label);
  return h('section', { 'aria-labelledby': 'h-export' }, h('h2', { id: 'h-export' }, 'Export'),
    h('p', { class: 'hint' }, 'The log with its (signed) trailer, checkable offline with tally verify --export. Streamed, then saved as a file.'),
    h('form', { class: 'inline', 'aria-label': 'Export range', onsubmit: (e) => e.preventDefault() },
      field('From seq', fromIn), field('To seq', toIn)),
    h('div', { class: 'buttons' }, btn('jsonl', 'Download JSONL export'), btn('csv', 'Download CSV export')), status);
}

async function runExport(format, fromSeq, toSeq, status) {
  const progress = h('p', { class: 'progress', role: 'status' }, 'Starting the export…');
  fill(status, progress);
  try {
    const res = await apiFetch(`/v1/audit/export${qs({ format, from_seq: fromSeq, to_seq: toSeq })}`);
    const reader = res.body.getReader();
    const chunks = [];
    let bytes = 0;
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      chunks.push(value);
      bytes += value.length;
      progress.textContent = `Received ${bytes.toLocaleString()} bytes…`;
    }
    const name = `tally-export_${fromSeq || 1}-${toSeq || 'head'}.${format}`;
    downloadBlob(new Blob(chunks, { type: format === 'csv' ? 'text/csv' : 'application/jsonl' }), name);
    progress.textContent = `Saved ${name} (${bytes.toLocaleString()} bytes).`;
  } catch (err) {
    const m = errorMessage(err, 'the export');
    if (m) fill(status, m);
  }
}

// ===========================================================================
// Not found, start
// ===========================================================================

views.notfound = (main) => {
  pageTitle(main, 'Page not found');
  main.append(h('p', {}, 'This console page does not exist. '), link('accounts', {}, 'Go to the accounts.'));
};

render({ focus: false });
