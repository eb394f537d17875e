#!/usr/bin/env python3
"""Module imports of a Rust crate's source directory (one module per file),
and any cycle among them: the check that data flows one way inside a crate.

usage: module-cycles.py SRC_DIR [--bin] [--quiet]
  SRC_DIR  the crate root's directory (lib.rs and/or main.rs); a `bin/`
           folder below it holds other crates and is skipped
  --bin    the binary's modules (main.rs and the modules it declares)
           instead of the library's; a crate with only main.rs is its binary
  --quiet  print only the cycles (or "no cycles")

A file's module path comes from its place under SRC_DIR; a reference
`crate::a::b::Item`, `super::x`, `self::x` or `use x::` counts as an import
of the longest module path it names. A module's references to its own
descendants are structure (it declares them, may re-export them), not
imports: a child extending its parent (say, `impl` blocks behind a cargo
feature) is no cycle. Everything else is an edge, and a cycle fails (exit 1).
"""
import os, re, sys

src = sys.argv[1]
quiet = '--quiet' in sys.argv[2:]
mods = {}
for d, dirs, files in os.walk(src):
    if os.path.samefile(d, src) and 'bin' in dirs:
        dirs.remove('bin')
    for f in files:
        if not f.endswith('.rs'):
            continue
        rel = os.path.relpath(os.path.join(d, f), src)[:-3].split(os.sep)
        if rel[-1] in ('mod', 'lib', 'main'):
            rel = rel[:-1]
        mods[tuple(rel)] = os.path.join(d, f)
want_bin = '--bin' in sys.argv[2:] or not os.path.exists(os.path.join(src, 'lib.rs'))
# binary modules (main.rs and what it declares) are a separate crate
bin_only = set()
if os.path.exists(os.path.join(src, 'main.rs')):
    main = open(os.path.join(src, 'main.rs')).read()
    for m in re.findall(r'^\s*(?:pub(?:\(crate\))?\s+)?mod\s+(\w+)\s*;', main, re.M):
        bin_only.add(m)
main_rs = os.path.join(src, 'main.rs')
lib_rs = os.path.join(src, 'lib.rs')
if want_bin:
    mods = {k: (main_rs if k == () else v) for k, v in mods.items() if (k and k[0] in bin_only) or k == ()}
else:
    mods = {k: (lib_rs if k == () else v) for k, v in mods.items() if not (k and k[0] in bin_only)}

def resolve(path):
    for n in range(len(path), 0, -1):
        if tuple(path[:n]) in mods:
            return tuple(path[:n])
    return None

graph = {}
for m, f in mods.items():
    text = open(f).read()
    text = re.sub(r'//[^\n]*', '', text)
    deps = set()
    for mm in re.finditer(r'\b(crate|super|self)((?:::\w+)+)', text):
        parts = mm.group(2).split('::')[1:]
        base = {'crate': [], 'self': list(m), 'super': list(m[:-1])}[mm.group(1)]
        while parts and parts[0] == 'super':
            base = base[:-1]; parts = parts[1:]
        r = resolve(base + parts)
        # a use-group like crate::{a, b}: each name
        if r is not None and r != m and r[:len(m)] != m:
            deps.add(r)
    for grp in re.finditer(r'\b(crate|super|self)((?:::\w+)*)::\{([^}]*)\}', text):
        base = {'crate': [], 'self': list(m), 'super': list(m[:-1])}[grp.group(1)]
        base = base + [p for p in grp.group(2).split('::') if p]
        for item in re.split(r'[,\s]+', grp.group(3)):
            if not item:
                continue
            r = resolve(base + item.split('::'))
            if r and r != m and r[:len(m)] != m:
                deps.add(r)
    graph[m] = deps

name = lambda m: '::'.join(m) or 'crate'
for m in sorted(graph) if not quiet else []:
    print(f"{name(m):32} -> {', '.join(sorted(name(d) for d in graph[m])) or '-'}")
# cycles: Tarjan SCCs
index, low, stack, on, sccs, i = {}, {}, [], set(), [], [0]
def strong(v):
    index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
    for w in graph.get(v, ()):
        if w not in index:
            strong(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v: break
        if len(comp) > 1:
            sccs.append(comp)
sys.setrecursionlimit(10000)
for v in graph:
    if v not in index:
        strong(v)
if sccs:
    for c in sccs:
        print("CYCLE:", ' <-> '.join(name(m) for m in c))
    sys.exit(1)
print("no cycles")
