#!/usr/bin/env bash
# Checks the member masks of the warp-synchronous instructions in every CUDA object of the build: each
# shfl.sync, vote.sync, bar.warp.sync, match.sync and redux.sync must name the full warp (-1, i.e.
# 0xffffffff) or a register (a mask computed at run time). An immediate such as 0 or 1 is the bug where a
# `bool kFull` template parameter shadowed the full-warp constant `kFull`: the shuffle compiled with a
# member mask of 1 or 0 and the other lanes read undefined values. Needs no GPU.
#
# Usage: scripts/check_ptx.sh [build-dir]   (default: build)
# The PTX comes from `cuobjdump -ptx` on each object (the PTX embedded for the compute_XX target). Where
# cuobjdump is not installed it is regenerated with `nvcc -ptx` from the object's command in
# compile_commands.json (same flags, same sources); without either tool the check fails and says so.
# Exits 0 when every mask is allowed, 1 naming each offending file, kernel and instruction, 2 on setup errors.
set -euo pipefail
build=${1:-build}
[ -d "$build" ] || { echo "check_ptx: build directory '$build' not found (build first)" >&2; exit 2; }
build=$(cd "$build" && pwd)
ptxdir="$build/ptx-check"
mkdir -p "$ptxdir"

mapfile -t objects < <(find "$build/CMakeFiles" -name '*.cu.o' -path '*mlalpha*' | sort)
# Only the objects the current configuration builds: a build folder reconfigured after targets were renamed still
# holds the old targets' objects, which no compile command names (and which the check would fail to regenerate).
if [ -f "$build/compile_commands.json" ]; then
  current=()
  for o in "${objects[@]}"; do grep -qF -- "-o ${o#"$build"/}" "$build/compile_commands.json" && current+=("$o"); done
  objects=("${current[@]}")
fi
[ ${#objects[@]} -gt 0 ] || { echo "check_ptx: no CUDA objects (*.cu.o) under $build/CMakeFiles (build first)" >&2; exit 2; }

cuobjdump_bin=$(command -v cuobjdump || true)
[ -z "$cuobjdump_bin" ] && [ -x /usr/local/cuda/bin/cuobjdump ] && cuobjdump_bin=/usr/local/cuda/bin/cuobjdump
if [ -z "$cuobjdump_bin" ]; then
  [ -f "$build/compile_commands.json" ] || {
    echo "check_ptx: cuobjdump is not installed and $build/compile_commands.json is missing, so the PTX can be" \
         "neither extracted nor regenerated; install the CUDA toolkit's cuobjdump (cuda-cuobjdump) or configure" \
         "with CMAKE_EXPORT_COMPILE_COMMANDS=ON" >&2
    exit 2
  }
  command -v python3 >/dev/null || { echo "check_ptx: cuobjdump is not installed and python3 (to read compile_commands.json) is missing" >&2; exit 2; }
fi

# compile_commands.json → the command that built `object` (relative to the build dir), as one line.
compile_command() {
  python3 - "$build/compile_commands.json" "$1" <<'EOF'
import json, sys
db, obj = sys.argv[1], sys.argv[2]
for e in json.load(open(db)):
    cmd = e.get("command") or " ".join(e["arguments"])
    if cmd.rstrip().endswith(" -o " + obj) or (" -o " + obj + " ") in cmd:
        print(cmd)
        break
EOF
}

# PTX of one object into $2 (regenerated only when the object is newer than the saved PTX).
extract_ptx() {
  local obj=$1 out=$2
  [ -s "$out" ] && [ "$out" -nt "$obj" ] && return 0
  if [ -n "$cuobjdump_bin" ]; then
    "$cuobjdump_bin" -ptx "$obj" >"$out.tmp"
  else
    local rel=${obj#"$build"/} cmd arch
    cmd=$(compile_command "$rel")
    [ -n "$cmd" ] || { echo "check_ptx: no compile command for $rel in compile_commands.json" >&2; return 1; }
    # One virtual architecture (nvcc -ptx accepts one): the first compute_XX the object was built for.
    arch=$(grep -oE 'compute_[0-9]+a?' <<<"$cmd" | head -n1)
    [ -n "$arch" ] || arch=compute_90
    # Drop the launcher-free command's target and output flags, keep every define, include and option.
    local args=() skip=0 w
    read -r -a words <<<"$cmd"
    for w in "${words[@]}"; do
      if [ $skip -eq 1 ]; then skip=0; continue; fi
      case $w in
        -o|-c) [ "$w" = -o ] && skip=1; continue ;;
        --generate-code=*|-gencode=*|-arch=*|--gpu-architecture=*) continue ;;
        -gencode|-arch) skip=1; continue ;;
      esac
      args+=("$w")
    done
    (cd "$build" && "${args[@]}" -arch="$arch" -ptx -o "$out.tmp")
  fi
  mv "$out.tmp" "$out"
}

# Prints "file: kernel K: member mask M in `instr`" for every offending instruction of one PTX file. The
# member mask is the last operand of each of these instructions (PTX ISA: shfl.sync, vote.sync,
# bar.warp.sync, match.sync, redux.sync). NVVM materialises constants in registers (`mov.u32 %r51, -1;`
# then `shfl.sync... %r51;`), so a register whose value within the function is an immediate counts as that
# immediate (first pass); only registers computed otherwise are masks computed at run time, and allowed.
scan_ptx() {
  awk -v file="$2" '
    function func_name(l,    n) {
      n = l; sub(/^[ \t]*(\.(visible|weak|extern)[ \t]+)*\.(entry|func)[ \t]+/, "", n)
      if (n ~ /^\(/) sub(/^\([^)]*\)[ \t]*/, "", n)
      sub(/\(.*/, "", n); gsub(/[ \t]/, "", n); return n
    }
    /^[ \t]*(\.(visible|weak|extern)[ \t]+)*\.(entry|func)[ \t]/ { kernel = func_name($0) }
    FNR == NR {
      if ($0 ~ /^[ \t]*mov\.[bus]32[ \t]+%r[0-9]+,[ \t]*-?(0x[0-9a-fA-F]+|[0-9]+)[ \t]*;/) {
        l = $0; sub(/^[ \t]*mov\.[bus]32[ \t]+/, "", l); sub(/;.*/, "", l)
        split(l, kv, /,[ \t]*/)
        key = kernel SUBSEP kv[1]
        # a register set to several immediates keeps the one that is not the full warp, if any
        if (!(key in imm) || imm[key] == "-1" || tolower(imm[key]) == "0xffffffff") imm[key] = kv[2]
      }
      next
    }
    /(shfl\.sync|vote\.sync|bar\.warp\.sync|match\.[a-z]+\.sync|redux\.sync)/ {
      line = $0; sub(/\/\/.*/, "", line); sub(/;.*/, "", line)
      m = line; sub(/.*,[ \t]*/, "", m); if (m == line) { m = line; sub(/.*[ \t]/, "", m) }
      gsub(/[ \t]/, "", m)
      shown = m
      if (m ~ /^%r[0-9]+$/ && ((kernel SUBSEP m) in imm)) { m = imm[kernel SUBSEP m]; shown = shown " = " m }
      if (m != "-1" && tolower(m) != "0xffffffff" && m !~ /^%/) {
        gsub(/^[ \t]+/, "", line); gsub(/[ \t]+/, " ", line)
        printf "%s: kernel %s: member mask %s in `%s`\n", file, kernel, shown, line
      }
    }' "$1" "$1"
}

status=0
for obj in "${objects[@]}"; do
  name=$(basename "$obj" .o)
  src=${obj#"$build/CMakeFiles/"}
  out="$ptxdir/$(tr '/' '_' <<<"$src").ptx"
  extract_ptx "$obj" "$out" || { echo "check_ptx: could not get the PTX of $src" >&2; status=2; continue; }
  # The member mask is the last operand of each of these instructions (PTX ISA: shfl.sync, vote.sync,
  # bar.warp.sync, match.sync, redux.sync). Allowed: -1, 0xffffffff (any case), or a register (%...).
  bad=$(scan_ptx "$out" "$src")
  if [ -n "$bad" ]; then
    status=1
    while IFS= read -r l; do
      k=$(sed -E 's/.*kernel ([^:]+):.*/\1/' <<<"$l")
      d=$(command -v c++filt >/dev/null && c++filt "$k" || echo "$k")
      echo "${l}   [$d]"
    done <<<"$bad" | sort -u | head -n 200
  fi
done
if [ $status -eq 0 ]; then
  echo "check_ptx: ${#objects[@]} CUDA objects, every warp-synchronous instruction names the full warp or a register mask"
elif [ $status -eq 1 ]; then
  echo "check_ptx: FAILED: warp-synchronous instructions with a constant member mask other than 0xffffffff (above)" >&2
fi
exit $status
