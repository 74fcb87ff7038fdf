#!/usr/bin/env python3
"""Checks that every kernel of an old PTX file is still in a new one, instruction for instruction.

Usage: scripts/ptx_entries_same.py OLD.ptx NEW.ptx
Make the two files with the build's flags and `-arch=compute_90 -ptx` (no GPU needed), e.g. from the branch
point's tree and from the changed one. Each `.entry` body is compared after the names that change when a kernel
gains a template parameter or the file's anonymous-namespace hash changes are normalised: the entry's own
mangled name (also in its parameter names), the anonymous namespace, basic-block label numbers and the names of
function-local shared variables. Exits 1 when an old entry has no identical body among the new ones (it names
them). Used for issue 38's bf16 activations: the fp32 instances of conv1d, softplus and the norms unchanged.
"""
import re
import sys


def entries(path):
    text = open(path).read()
    out = {}
    for part in re.split(r'(?=^\.(?:visible )?\.?entry )', text, flags=re.M):
        m = re.match(r'\.(?:visible \.)?entry (\S+)\(', part)
        if not m:
            continue
        name = m.group(1)
        body = part.replace(name, 'KERNEL')
        body = re.sub(r'_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]+', 'ANON', body)
        body = re.sub(r'\$L__BB\d+_', '$L__BB_', body)
        body = re.sub(r'_ZZ[^\s\[;,]*', '_ZZLOCAL', body)
        end = body.find('\n}\n')
        out[name] = body[:end + 3] if end >= 0 else body
    return out


def main():
    old, new = entries(sys.argv[1]), entries(sys.argv[2])
    bodies = set(new.values())
    changed = [k for k, v in old.items() if v not in bodies]
    for k in changed:
        print('changed:', k)
    print(f'{sys.argv[1]}: {len(old)} entries, {len(old) - len(changed)} unchanged in {sys.argv[2]} '
          f'({len(new)} entries there), {len(changed)} changed')
    return 1 if changed else 0


if __name__ == '__main__':
    sys.exit(main())
