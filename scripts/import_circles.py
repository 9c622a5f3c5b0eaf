#!/usr/bin/env python3
"""Module graph of a crate's src/ from its `crate::`, `super::` and re-export
paths (comments and `mod tests` skipped); prints every import circle.
Exits 1 if there is one.
Usage: scripts/import_circles.py ledger/src [-v]"""
import os, re, sys
root = sys.argv[1]
files = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if f.endswith('.rs') and f != 'main.rs':
            p = os.path.join(d, f)
            rel = os.path.relpath(p, root)[:-3].replace(os.sep, '::')
            if rel.endswith('::mod'): rel = rel[:-5]
            if rel == 'lib': rel = 'crate'
            files[rel] = p
mods = set(files)
def resolve(path):
    parts = path.split('::')
    for i in range(len(parts), 0, -1):
        m = '::'.join(parts[:i])
        if m in mods: return m
    return None
edges = {m: set() for m in mods}
for m, p in files.items():
    src = open(p).read()
    # drop test modules: everything after `#[cfg(test)]\nmod tests`
    src = re.split(r'#\[cfg\(test\)\]\s*(?:#\[[^\]]*\]\s*)*mod tests\s*\{', src)[0]
    code = '\n'.join(l.split('//')[0] for l in src.splitlines())
    # `pub(in crate::x)` is a visibility, not an import
    code = re.sub(r'pub\(in [^)]*\)', 'pub', code)
    # expand `use crate::{a, b::{c}}` roughly: take every ident path after crate::
    for mm in re.finditer(r'crate::((?:[a-z_][a-z0-9_]*::)*)(\{[^;]*?\}|[A-Za-z_][A-Za-z0-9_]*)', code):
        prefix = mm.group(1).rstrip(':')
        tail = mm.group(2)
        if tail.startswith('{'):
            for item in re.findall(r'([a-z_][a-z0-9_]*(?:::[a-z_][a-z0-9_]*)*)', tail):
                t = resolve((prefix + '::' if prefix else '') + item)
                if t: edges[m].add(t)
        t = resolve(prefix + ('::' + tail if prefix else tail)) or (resolve(prefix) if prefix else None)
        if t: edges[m].add(t)
    # `super::x` inside a folder module
    supers = [m2.group(1) for m2 in re.finditer(r'\bsuper::((?:[a-z_][a-z0-9_]*::)*[a-z_][a-z0-9_]*)', code)]
    for grp in re.finditer(r'\bsuper::\{([^}]*)\}', code):
        supers += re.findall(r'\b([a-z_][a-z0-9_]*)\b', grp.group(1))
    # a folder module's `pub use child::x` / `mod child` re-exports
    if files[m].endswith('mod.rs') or m == 'crate':
        for child in re.findall(r'^\s*(?:pub(?:\([a-z]+\))? )?use ([a-z_][a-z0-9_]*)::', code, flags=re.M):
            t = resolve((m + '::' if m != 'crate' else '') + child)
            if t: edges[m].add(t)
    class _M:  # adapter so the loop below reads the same
        def __init__(self, g): self.g = g
        def group(self, i): return self.g
    for mm in map(_M, supers):
        parent = m.rsplit('::', 1)[0] if '::' in m else 'crate'
        if m in ('crate',): continue
        base = parent.rsplit('::',1)[0] if files[m].endswith('mod.rs') else parent
        t = resolve((base + '::' if base != 'crate' else '') + mm.group(1))
        if t: edges[m].add(t)
for m in edges: edges[m].discard(m); edges[m].discard('crate')
# a module's parent (folder mod.rs) is not a dependency of its children
# Tarjan
idx, low, on, st, out, n = {}, {}, set(), [], [], [0]
def sc(v):
    idx[v] = low[v] = n[0]; n[0] += 1; st.append(v); on.add(v)
    for w in edges[v]:
        if w not in idx: sc(w); low[v] = min(low[v], low[w])
        elif w in on: low[v] = min(low[v], idx[w])
    if low[v] == idx[v]:
        comp = []
        while True:
            w = st.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1: out.append(sorted(comp))
sys.setrecursionlimit(10000)
for v in sorted(edges):
    if v not in idx: sc(v)
print(f"{len(mods)} modules, {sum(len(e) for e in edges.values())} edges")
if '-v' in sys.argv:
    for m in sorted(edges): print(f"  {m} -> {', '.join(sorted(edges[m]))}")
print("circles:", out if out else "none")
sys.exit(1 if out else 0)
