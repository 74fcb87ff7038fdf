#!/usr/bin/env bash
# The hostile audit of issue 37 ("Nothing lost, ever"): hundreds of bad inputs and faults thrown at the command
# (CPU build), each case classified as
#   clear    a refusal (non-zero exit) whose message names the file, line or setting at fault, or a success where
#            success is right (a fault the run recovered from, an input that is valid)
#   unclear  a refusal that does not name what is wrong, or a refusal of something that should work
#   silent   exit 0 where an input or a setting was wrong or ignored
#   crash    a signal we did not send, an abort, a timeout (hang)
#   loss     a user's earlier file (a finished run, its checkpoints, a prediction file, an input) changed or gone
# Every case hashes the user's files ("precious": runs, predictions, inputs) before and after.
# Usage: fuzz/hostile_audit.sh [path/to/ml-alpha] [-v]     (about 3-5 minutes on 2 cores; works in a temp dir)
# Exit status 0 when the issue's targets hold (0 loss, 0 crash, silent <= 5, unclear <= 10).
set -u
BIN=$(readlink -f "${1:-build/ml-alpha}")
VERBOSE=${2:-}
[ -x "$BIN" ] || { echo "no ml-alpha at $BIN" >&2; exit 2; }
W=$(mktemp -d /tmp/mlalpha_hostile.XXXXXX)
trap 'chmod -R u+rwX "$W" 2>/dev/null; rm -rf "$W"' EXIT
cd "$W" || exit 2
declare -A TALLY=([clear]=0 [unclear]=0 [silent]=0 [crash]=0 [loss]=0)
N=0
REPORT="$W/report.txt"
T0=$(date +%s)

note() {  # CATEGORY NAME DETAIL
  TALLY[$1]=$((TALLY[$1] + 1)); N=$((N + 1))
  printf '%-8s %s :: %s\n' "$1" "$2" "$3" >> "$REPORT"
  if [ "$1" != clear ] || [ -n "$VERBOSE" ]; then printf '%-8s %s :: %s\n' "$1" "$2" "$3"; fi
}
precious_list() { find "$W/precious" -type f -not -name '*.lock' -print0 2>/dev/null | sort -z | xargs -0 md5sum 2>/dev/null; }
# A loss: a file of the user's there before the case is changed or gone (new files beside them are no loss).
precious_lost() { LC_ALL=C comm -23 <(echo "$1" | LC_ALL=C sort) <(precious_list | LC_ALL=C sort); }
first_line() { grep -av '^\s*$' "$1" | grep -aiE 'error|refus|cannot|not |invalid|expected|must|unknown|did you' | head -1 | cut -c1-220; }

# ck KIND NAME NEEDLE CMD...   KIND: err (must be refused), any (success or a clear refusal), ok (must succeed)
# NEEDLE: an extended regex a clear message matches (the file, line or setting named).
ck() {
  local kind=$1 name=$2 needle=$3; shift 3
  local before; before=$(precious_list)
  timeout -k 5 40 bash -c "$*" > "$W/out.log" 2>&1 < /dev/null
  local rc=$?
  local msg; msg=$(first_line "$W/out.log"); [ -z "$msg" ] && msg=$(tail -c 200 "$W/out.log" | tr '\n' ' ')
  local lost; lost=$(precious_lost "$before")
  if [ -n "$lost" ]; then note loss "$name" "rc=$rc: changed or gone: $(echo "$lost" | awk '{print $2}' | tr '\n' ' ') ($msg)"; restore_precious; return; fi
  if [ $rc -eq 124 ]; then note crash "$name" "hang (timeout)"; return; fi
  if [ $rc -ge 128 ] || grep -aqE 'terminate called|Segmentation|Aborted|AddressSanitizer|core dumped|std::bad_alloc|what\(\)' "$W/out.log"; then
    note crash "$name" "rc=$rc $msg"; return; fi
  case $kind in
    err) if [ $rc -eq 0 ]; then note silent "$name" "exit 0: $(tail -c 160 "$W/out.log" | tr '\n' ' ')"
         elif grep -aqE -- "$needle|:[0-9]+: " "$W/out.log"; then note clear "$name" "$msg"
         else note unclear "$name" "rc=$rc: $msg"; fi ;;
    any) if [ $rc -eq 0 ] || grep -aqE -- "$needle|:[0-9]+: " "$W/out.log"; then note clear "$name" "rc=$rc $msg"
         else note unclear "$name" "rc=$rc: $msg"; fi ;;
    ok) if [ $rc -eq 0 ]; then note clear "$name" "ok"; else note unclear "$name" "refused: rc=$rc $msg"; fi ;;
  esac
}

# ---- the user's files ----------------------------------------------------------------------------------------
mkdir -p precious
"$BIN" synth -o precious/data --format csv --instruments 4 --timesteps 120 --features 3 > /dev/null || exit 2
PANEL=$W/precious/data/panel.csv
DATA="--set 'data.source=\"csv\"' --set 'data.csv=\"$PANEL\"' --set 'data.feature_columns=[\"f0\",\"f1\",\"f2\"]' --set 'data.target_columns=[\"y0\"]'"
DATAX="--set 'data.source=\"csv\"' --set 'data.feature_columns=[\"f0\",\"f1\",\"f2\"]' --set 'data.target_columns=[\"y0\"]'"
MODEL="--device cpu --threads 1 --d-model 8 --head-dim 4 --layers 1 --d-state 4 -B 4 -L 12 --warmup 1"
TINY="$MODEL --steps 8 --eval-every 4"
eval "\"$BIN\" train $DATA $TINY -o precious/run" > /dev/null 2>&1 || { echo "setup: train failed" >&2; exit 2; }
eval "\"$BIN\" train $DATA $TINY --models 2 -o precious/pop" > /dev/null 2>&1 || { echo "setup: population failed" >&2; exit 2; }
CK=$W/precious/run/best.safetensors
eval "\"$BIN\" predict $DATA --device cpu --threads 1 --checkpoint $CK --split all -o precious/pred" > /dev/null 2>&1 || exit 2
HDR=$(head -1 "$PANEL")
body() { sed -n "2,$(( $1 * 4 + 1 ))p" "$PANEL"; }  # the first $1 time steps
{ echo "$HDR"; sed -n '2,41p' "$PANEL"; } > precious/hist.csv
{ echo "$HDR"; sed -n '42,201p' "$PANEL"; } > precious/live.csv
"$BIN" stream --device cpu --threads 1 --checkpoint "$CK" --history precious/hist.csv -i precious/live.csv \
  --state precious/s.state -o precious/stream_out.csv > /dev/null 2>&1 || { echo "setup: stream failed" >&2; exit 2; }
{ echo "$HDR"; sed -n '122,241p' "$PANEL"; } > live30.csv  # times 30 .. 59: after any 30-step history
# A loss is reported, then the user's files are put back so that later cases do not cascade.
cp -a precious "$W/precious.orig"
restore_precious() { rm -rf "$W/precious"; cp -a "$W/precious.orig" "$W/precious"; }

# ---- 1. malformed CSV, for train, predict, eval, stream -i and stream --history -------------------------------
mkdir -p csv
gen_csv() {  # VARIANT FILE
  local f=$2
  case $1 in
    empty) : > "$f" ;;
    header_only) echo "$HDR" > "$f" ;;
    no_header) body 30 > "$f" ;;
    binary) head -c 8192 /dev/urandom > "$f" ;;
    nul_bytes) { echo "$HDR"; body 30 | sed '5s/,/\x00,/'; } > "$f" ;;
    unterminated) { echo "$HDR"; body 30; } | head -c -1 > "$f" ;;
    crlf) { echo "$HDR"; body 30; } | sed 's/$/\r/' > "$f" ;;
    bom) { printf '\xef\xbb\xbf'; echo "$HDR"; body 30; } > "$f" ;;
    missing_cell) { echo "$HDR"; body 30 | sed '7s/,[^,]*$//'; } > "$f" ;;
    extra_cell) { echo "$HDR"; body 30 | sed '7s/$/,1.0/'; } > "$f" ;;
    text_cell) { echo "$HDR"; body 30 | sed '9s/,[^,]*,/,abc,/2'; } > "$f" ;;
    inf_cell) { echo "$HDR"; body 30 | sed '9s/,[^,]*,/,inf,/2'; } > "$f" ;;
    overflow_cell) { echo "$HDR"; body 30 | sed '9s/,[^,]*,/,1e400,/2'; } > "$f" ;;
    empty_cell) { echo "$HDR"; body 30 | sed '9s/,[^,]*,/,,/2'; } > "$f" ;;
    huge_line) { echo "$HDR"; head -c 30000000 /dev/zero | tr '\0' 'a'; echo; } > "$f" ;;
    huge_header) { head -c 3000000 /dev/zero | tr '\0' 'x'; echo ",$HDR"; body 30; } > "$f" ;;
    time_backwards) { echo "$HDR"; body 30 | sed '20s/^[0-9]*,/2,/'; } > "$f" ;;
    dup_row) { echo "$HDR"; body 30 | sed '10p'; } > "$f" ;;
    time_text) { echo "$HDR"; body 30 | sed '13s/^[0-9]*,/yesterday,/'; } > "$f" ;;
    renamed_col) { echo "$HDR" | sed 's/f1/g1/'; body 30; } > "$f" ;;
    dup_col) { echo "$HDR,f0"; body 30 | sed 's/$/,0.5/'; } > "$f" ;;
    one_step) { echo "$HDR"; body 1; } > "$f" ;;
    empty_instrument) { echo "$HDR"; body 30 | sed '6s/,inst[0-9]*,/,,/'; } > "$f" ;;
    semicolons) { echo "$HDR"; body 30; } | tr ',' ';' > "$f" ;;
    blank_lines) { echo "$HDR"; body 30 | sed '8s/$/\n\n/'; } > "$f" ;;
    many_columns) { printf '%s' "$HDR"; for i in $(seq 5000); do printf ',c%d' "$i"; done; echo; body 2; } > "$f" ;;
    invalid_utf8) { echo "$HDR"; body 30 | sed '5s/inst[0-9]/\xff\xfe/'; } > "$f" ;;
    quoted) { echo "$HDR"; body 30 | sed '5s/inst\([0-9]\)/"inst\1"/'; } > "$f" ;;
    neg_zero_time) { echo "$HDR"; body 30 | sed 's/^\([0-9]*\),/-\1,/' | tac; } > "$f" ;;
    only_newlines) printf '\n\n\n' > "$f" ;;
    nan_target) { echo "$HDR"; body 30 | sed 's/,[^,]*$/,nan/'; } > "$f" ;;
    constant_features) { echo "$HDR"; body 30 | awk -F, 'BEGIN{OFS=","}{$3=1;$4=1;$5=1;print}'; } > "$f" ;;
  esac
}
CSV_VARIANTS="empty header_only no_header binary nul_bytes unterminated crlf bom missing_cell extra_cell text_cell inf_cell
 overflow_cell empty_cell huge_line huge_header time_backwards dup_row time_text renamed_col dup_col one_step empty_instrument
 semicolons blank_lines many_columns invalid_utf8 quoted neg_zero_time only_newlines nan_target constant_features"
# Variants that are valid input for the stream (any: success or a clear refusal).
csv_kind() {
  case $1 in invalid_utf8|neg_zero_time|unterminated|crlf|bom|blank_lines|quoted|empty_cell|only_newlines|nan_target|constant_features|header_only|one_step|empty) echo any ;;
    *) echo err ;; esac
}
for v in $CSV_VARIANTS; do
  f=$W/csv/$v.csv; gen_csv "$v" "$f"
  k=$(csv_kind "$v")
  # train: a panel of 30 steps, or less, is too short or wrong in most variants; any clear message names the file
  ck any "train-csv-$v" "$v.csv|csv|time step|instrument|column" "\"$BIN\" train $DATAX --set 'data.csv=\"$f\"' $TINY -o $W/t_$v"
  ck any "eval-csv-$v" "$v.csv|csv|column|range" "\"$BIN\" eval $DATAX --set 'data.csv=\"$f\"' --device cpu --threads 1 --checkpoint $CK"
  ck any "predict-csv-$v" "$v.csv|csv|column|range" "\"$BIN\" predict $DATAX --set 'data.csv=\"$f\"' --device cpu --threads 1 --checkpoint $CK --split all -o $W/p_$v"
  ck "$k" "stream-i-$v" "$v.csv|line [0-9]|header|column" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK --new-instruments -i $f -o $W/so_$v.csv"
  ck "$k" "stream-hist-$v" "$v.csv|line [0-9]|header|column" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK --history $f -i $W/live30.csv -o $W/sh_$v.csv"
  ck "$k" "stream-stdin-$v" "standard input|stdin|line [0-9]|header|column" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK --new-instruments -o $W/ss_$v.csv < $f"
done
rm -f "$W/csv/huge_line.csv" "$W/csv/huge_header.csv"

# ---- 2. special paths as inputs ------------------------------------------------------------------------------
mkdir -p paths/adir paths/ro && mkfifo paths/fifo && ln -s loop1 paths/loop2 && ln -s loop2 paths/loop1 && ln -s "$W/paths/adir" paths/dirlink
ln -s "$W/nowhere" paths/dangling
SPECIAL="/dev/zero /dev/null /dev/urandom $W/paths/adir $W/paths/dirlink $W/paths/loop1 $W/paths/dangling $W/nonexistent.csv $W/paths/fifo"
for s in $SPECIAL; do
  b=$(basename "$s")
  # A FIFO gets a writer that sends garbage and closes, so a reader that opens it does not wait forever.
  pre=""; [ "$b" = fifo ] && pre="(timeout 5 sh -c \"printf 'x,y\\n1,2\\n' > $s\" &) ; "
  ck err "train-data-$b" "$b" "$pre \"$BIN\" train $DATAX --set 'data.csv=\"$s\"' $TINY -o $W/tp_$b"
  ck err "train-config-$b" "$b" "$pre \"$BIN\" train -c $s $TINY -o $W/tc_$b"
  ck err "stream-i-$b" "$b|line" "$pre \"$BIN\" stream --device cpu --threads 1 --checkpoint $CK --new-instruments -i $s -o $W/sp_$b.csv"
  ck err "stream-hist-$b" "$b|line" "$pre \"$BIN\" stream --device cpu --threads 1 --checkpoint $CK --history $s -i $W/precious/live.csv -o $W/sq_$b.csv"
  ck err "stream-instfile-$b" "$b|line" "$pre \"$BIN\" stream --device cpu --threads 1 --checkpoint $CK --instruments-file $s -i $W/precious/live.csv -o $W/sr_$b.csv"
  ck err "predict-ck-$b" "$b" "$pre \"$BIN\" predict $DATA --device cpu --threads 1 --checkpoint $s -o $W/pc_$b"
  ck err "info-ck-$b" "$b" "$pre \"$BIN\" info --checkpoint $s"
  ck err "info-state-$b" "$b" "$pre \"$BIN\" info --state $s"
  ck err "resume-$b" "$b" "$pre \"$BIN\" train --device cpu --resume $s"
done

# ---- 3. special paths as outputs -----------------------------------------------------------------------------
mkdir -p outs && chmod 555 paths/ro && echo keep > outs/afile && mkdir -p outs/adir
OUTS="/dev/full /dev/null $W/outs/afile $W/outs/adir $W/paths/ro/x $W/paths/dangling $W/paths/loop1 $W/outs/no/such/dir/x"
for o in $OUTS; do
  b=$(basename "$(dirname "$o")")_$(basename "$o")
  ck any "train-o-$b" "$(basename "$o")|run.out_dir|out_dir" "\"$BIN\" train $DATA $TINY -o $o"
  case $o in /dev/*) ck err "stream-state-$b" "$(basename "$o")|state" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK --new-instruments -i $W/precious/live.csv --state $o -o $W/st_$b.csv"
    ck any "stream-o-$b" "$(basename "$o")" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK --new-instruments -i $W/precious/live.csv -o $o"; continue ;; esac
  ck any "predict-o-$b" "$(basename "$o")" "\"$BIN\" predict $DATA --device cpu --threads 1 --checkpoint $CK --split all -o $o"
  ck any "stream-o-$b" "$(basename "$o")" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK --new-instruments -i $W/precious/live.csv -o $o"
  ck any "synth-o-$b" "$(basename "$o")" "\"$BIN\" synth --instruments 2 --timesteps 20 --features 2 -o $o"
  ck any "stream-state-$b" "$(basename "$o")|state" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK --new-instruments -i $W/precious/live.csv --state $o -o $W/st_$b.csv"
done
# Writing to /dev/full must fail, not exit 0.
ck err "stream-stdout-devfull" "No space|full|write" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK --new-instruments -i $W/precious/live.csv > /dev/full"
# The user's files as outputs, with and without --overwrite: refused, never written over.
for tgt in "$W/precious/run" "$W/precious/pop" "$W/precious/data" ; do
  b=$(basename "$tgt")
  ck err "train-over-$b" "$b|--overwrite|--resume" "\"$BIN\" train $DATA $TINY -o $tgt"
  ck err "synth-over-$b" "$b|--overwrite" "\"$BIN\" synth --instruments 2 --timesteps 20 --features 2 -o $tgt"
done
ck err "stream-o-input" "same file" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK -i $W/precious/live.csv -o $W/precious/live.csv"
ck err "stream-o-history" "same file" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK --history $W/precious/hist.csv -i $W/precious/live.csv -o $W/precious/hist.csv"
ck err "stream-o-ck" "same file" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK -i $W/precious/live.csv -o $CK"
ck err "stream-o-state" "state" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK -i $W/precious/live.csv --state $W/precious/s.state -o $W/precious/s.state"
ck err "stream-state-is-input" "same file" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK -i $W/precious/live.csv --state $W/precious/live.csv -o $W/x.csv"
ck err "stream-state-is-ck" "same file|state|checkpoint" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK -i $W/precious/live.csv --state $CK -o $W/x.csv"
ck err "stream-state-is-pred" "state|pred.csv" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK -i $W/precious/live.csv --state $W/precious/pred.csv -o $W/x2.csv"
ln -s "$W/precious/live.csv" links_live.csv; ln "$W/precious/live.csv" hard_live.csv
ln -s "$W/precious/pred.csv" links_pred.csv
ck err "stream-o-symlink-input" "same file" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK -i $W/precious/live.csv -o $W/links_live.csv"
ck err "stream-o-hardlink-input" "same file" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK -i $W/precious/live.csv -o $W/hard_live.csv"
ck err "stream-o-stdin-same" "same file" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $CK -o $W/hard_live.csv < $W/precious/live.csv"
ck err "predict-o-over-data" "panel|same|data|overwrite" "\"$BIN\" predict $DATA --device cpu --threads 1 --checkpoint $CK --split all -o $W/precious/data/panel"
ck any "predict-o-over-ck" "best|same|checkpoint|overwrite" "\"$BIN\" predict $DATA --device cpu --threads 1 --checkpoint $CK --split all -o $W/precious/run/best"
ck any "predict-o-symlink-pred" "pred" "\"$BIN\" predict $DATA --device cpu --threads 1 --checkpoint $CK --split all -o $W/links_pred"
ck err "synth-o-run-folder" "--overwrite|run" "\"$BIN\" synth --instruments 2 --timesteps 20 --features 2 --format npy -o $W/precious/run"
ck err "eval-svg-over-ck" "best|same|checkpoint|overwrite|safetensors" "\"$BIN\" eval $DATA --device cpu --threads 1 --checkpoint $CK --long-short-svg $CK"
ck err "eval-svg-over-panel" "panel|same|overwrite|read" "\"$BIN\" eval $DATA --device cpu --threads 1 --checkpoint $CK --long-short-svg $PANEL"

# ---- 4. TOML: malformed files, wrong types, unknown keys -----------------------------------------------------
mkdir -p toml
gen_toml() {
  case $1 in
    empty) : ;;
    binary) head -c 2048 /dev/urandom ;;
    unterminated_string) printf '[train]\nlr = "0.1\n' ;;
    unterminated_table) printf '[train\nlr = 0.1\n' ;;
    duplicate_key) printf '[train]\nlr = 0.1\nlr = 0.2\n' ;;
    duplicate_table) printf '[train]\nlr = 0.1\n[train]\nsteps = 3\n' ;;
    unknown_section) printf '[trian]\nlr = 0.1\n' ;;
    unknown_key) printf '[train]\nlerning_rate = 0.1\n' ;;
    top_level_key) printf 'lr = 0.1\n' ;;
    no_value) printf '[train]\nlr =\n' ;;
    nested_arrays) printf '[train]\nlr = '; head -c 200000 /dev/zero | tr '\0' '['; echo ;;
    nested_tables) printf 'a = '; for i in $(seq 20000); do printf '{a='; done; echo ;;
    long_key) printf '[train]\n'; head -c 100000 /dev/zero | tr '\0' k; echo ' = 1' ;;
    nul_byte) printf '[train]\nlr = 0.1\x00\n' ;;
    invalid_utf8) printf '[run]\nout_dir = "\xff\xfe"\n' ;;
    table_for_scalar) printf '[train]\nlr = {a = 1}\n' ;;
    array_for_scalar) printf '[train]\nsteps = [1, 2]\n' ;;
    string_for_int) printf '[train]\nsteps = "ten"\n' ;;
    float_for_int) printf '[train]\nsteps = 10.5\n' ;;
    bool_for_float) printf '[train]\nlr = true\n' ;;
    date_for_int) printf '[model]\nd_model = 1979-05-27\n' ;;
    section_is_value) printf 'train = 3\n' ;;
    array_of_tables) printf '[[train]]\nlr = 0.1\n' ;;
    huge_int) printf '[train]\nsteps = 99999999999999999999999\n' ;;
    crlf) printf '[train]\r\nsteps = 8\r\n' ;;
    bom) printf '\xef\xbb\xbf[train]\nsteps = 8\n' ;;
    huge_comment) printf '# '; head -c 5000000 /dev/zero | tr '\0' c; printf '\n[train]\nsteps = 8\n' ;;
    dotted_conflict) printf 'train.lr = 0.1\n[train]\nlr = 0.2\n' ;;
    csv_is_dir) printf '[data]\nsource = "csv"\ncsv = "/tmp"\n' ;;
    source_typo) printf '[data]\nsource = "cvs"\n' ;;
  esac
}
TOML_VARIANTS="empty binary unterminated_string unterminated_table duplicate_key duplicate_table unknown_section unknown_key
 top_level_key no_value nested_arrays nested_tables long_key nul_byte invalid_utf8 table_for_scalar array_for_scalar
 string_for_int float_for_int bool_for_float date_for_int section_is_value array_of_tables huge_int crlf bom huge_comment
 dotted_conflict csv_is_dir source_typo"
for v in $TOML_VARIANTS; do
  f=$W/toml/$v.toml; gen_toml "$v" > "$f"
  k=err; case $v in empty|crlf|bom|huge_comment) k=any ;; esac
  ck $k "train-toml-$v" "$v.toml|line [0-9]|train\.|data\.|lr|steps|d_model|expected|did you mean" "\"$BIN\" train -c $f $TINY --steps 2 -o $W/tt_$v"
  ck $k "eval-toml-$v" "$v.toml|line [0-9]|train\.|data\.|lr|steps|d_model|expected|did you mean" "\"$BIN\" eval -c $f --device cpu --threads 1 --checkpoint $CK"
done

# ---- 5. --set: wrong types and values of each setting --------------------------------------------------------
KEYS="model.d_model model.layers model.expand model.head_dim model.groups model.d_state model.conv_width model.chunk
 model.dt_min model.dt_max train.batch train.seq_len train.steps train.lr train.weight_decay train.clip train.seed
 train.log_every train.models train.warmup train.loss train.precision run.threads run.eval_every run.save_every
 run.patience run.metric data.instruments data.timesteps data.n_features data.noise data.delimiter data.feature_norm
 split.train_end split.valid_end split.gap split.walk_forward_folds"
BADS=("'\"abc\"'" "-3" "true" "[1,2]" "'{a=1}'" "nan")
for key in $KEYS; do
  for val in "${BADS[@]}"; do
    # A value a key can take is not an error: strings for the string keys, -3 nowhere, nan nowhere.
    k=err
    case "$key:$val" in
      train.seed:-3|train.clip:-3|*:true) k=any ;;
      train.loss:*abc*|run.metric:*abc*|train.precision:*abc*|data.feature_norm:*abc*|data.delimiter:*abc*) k=err ;;
      split.train_end:*abc*|split.valid_end:*abc*) k=err ;;
    esac
    ck $k "set-$key=$val" "${key#*.}|$key" "\"$BIN\" train --device cpu --threads 1 --instruments 4 --timesteps 120 --features 3 --steps 2 --set $key=$val -o $W/set_run"
    rm -rf "$W/set_run"
  done
done
# Flags with bad values.
FLAGS="--steps --lr --d-model --layers --head-dim --d-state -B -L --threads --eval-every --save-every --models --warmup --instruments --timesteps --features"
for fl in $FLAGS; do
  for val in abc -1 0 1e99 '""'; do
    k=err; case "$fl:$val" in --threads:0|--eval-every:0|--save-every:0|--warmup:0) k=any ;; esac
    base=$(echo " --device cpu --threads 1 --instruments 4 --timesteps 120 --features 3 --d-model 8 --head-dim 4 --layers 1 --d-state 4 -B 4 -L 12 --steps 2 --eval-every 2 " | sed "s/ $fl [^ ]* / /")
    ck $k "flag$fl=$val" "${fl#--}|$fl|--batch|--seq-len|train\.|model\.|run\.|data\." "\"$BIN\" train $base $fl $val -o $W/flag_run"
    rm -rf "$W/flag_run"
  done
done
# Settings that would do nothing.
ck err "predict-members-solo" "members" "\"$BIN\" predict $DATA --device cpu --checkpoint $CK --members top:1 -o $W/pm"
ck err "predict-fold-solo" "fold" "\"$BIN\" predict $DATA --device cpu --checkpoint $CK --fold 1 -o $W/pf"
ck err "predict-fold-neg" "fold" "\"$BIN\" predict $DATA --device cpu --checkpoint $W/precious/pop --fold -1 -o $W/pfn"
ck err "predict-members-empty" "members" "\"$BIN\" predict $DATA --device cpu --checkpoint $W/precious/pop --members '' -o $W/pme"
ck err "predict-members-unknown" "member-09|members" "\"$BIN\" predict $DATA --device cpu --checkpoint $W/precious/pop --members member-09 -o $W/pmu"
ck err "predict-members-topbad" "top|members" "\"$BIN\" predict $DATA --device cpu --checkpoint $W/precious/pop --members top:0 -o $W/pmt"
ck err "predict-split-bad" "split" "\"$BIN\" predict $DATA --device cpu --checkpoint $CK --split tset -o $W/psb"
ck err "predict-mode-bad" "mode" "\"$BIN\" predict $DATA --device cpu --checkpoint $CK --mode carryy -o $W/pmb"
ck err "predict-bf16-cpu" "precision|bf16" "\"$BIN\" predict $DATA --device cpu --precision bf16 --checkpoint $CK -o $W/pbf"
ck err "predict-other-norm" "feature_norm" "\"$BIN\" predict $DATA --device cpu --checkpoint $CK --set data.feature_norm='\"robust\"' -o $W/pon"
ck err "stream-members-solo" "members" "\"$BIN\" stream --device cpu --checkpoint $CK --members top:1 -i $W/precious/live.csv -o $W/smo.csv"
ck err "stream-fold-solo" "fold" "\"$BIN\" stream --device cpu --checkpoint $CK --fold 0 -i $W/precious/live.csv -o $W/sfo.csv"
ck err "stream-state-empty" "state" "\"$BIN\" stream --device cpu --checkpoint $CK --state '' -i $W/precious/live.csv -o $W/sse.csv"
ck err "stream-mode-bad" "mode" "\"$BIN\" stream --device cpu --checkpoint $CK --mode x -i $W/precious/live.csv -o $W/smb.csv"
ck err "stream-bf16" "precision|bf16" "\"$BIN\" stream --device cpu --precision bf16 --checkpoint $CK -i $W/precious/live.csv -o $W/sbf.csv"
ck err "stream-other-norm" "feature_norm" "\"$BIN\" stream --device cpu --checkpoint $CK --set data.feature_norm='\"robust\"' -i $W/precious/live.csv -o $W/son.csv"
ck err "stream-set-steps" "train.steps|steps" "\"$BIN\" stream --device cpu --checkpoint $CK --new-instruments --set train.steps=5 -i $W/precious/live.csv -o $W/sst.csv"
ck err "stream-instruments-empty" "instruments" "\"$BIN\" stream --device cpu --checkpoint $CK --instruments '' -i $W/precious/live.csv -o $W/sie.csv"
ck err "stream-instruments-dup" "inst0|instruments" "\"$BIN\" stream --device cpu --checkpoint $CK --instruments inst0,inst0 -i $W/precious/live.csv -o $W/sid.csv"
ck err "eval-split-all" "split" "\"$BIN\" eval $DATA --device cpu --checkpoint $CK --split all"
ck err "eval-fold-solo" "fold" "\"$BIN\" eval $DATA --device cpu --checkpoint $CK --fold 2"
ck err "train-resume-overwrite" "--overwrite|resume" "\"$BIN\" train --device cpu --resume $W/precious/run --overwrite"
ck err "train-precision-empty" "precision" "\"$BIN\" train $TINY --precision '' -o $W/tpe"
ck any "train-bf16-cpu" "GPU only" "\"$BIN\" train $TINY --instruments 4 --timesteps 120 --features 3 --precision bf16 -o $W/tbf"
ck err "train-device-bad" "device" "\"$BIN\" train $TINY --device cpuu -o $W/tdb"
ck err "train-unknown-flag" "--stpes|steps" "\"$BIN\" train $TINY --stpes 3 -o $W/tuf"
ck err "train-set-nokey" "set|=" "\"$BIN\" train $TINY --set train.lr -o $W/tsn"
ck err "train-set-unknown" "did you mean|lerning" "\"$BIN\" train $TINY --set train.lerning_rate=1 -o $W/tsu"
ck err "train-set-empty" "set|override" "\"$BIN\" train $TINY --set '' -o $W/tse"
ck err "train-o-empty" "out|-o" "\"$BIN\" train $TINY --instruments 4 --timesteps 120 --features 3 -o ''"
ck err "synth-over-no-overwrite" "--overwrite|panel" "\"$BIN\" synth -o $W/precious/data --format csv --instruments 4 --timesteps 120 --features 3"
ck err "synth-format-bad" "format" "\"$BIN\" synth -o $W/sfb --format parquet"
ck err "info-fold-solo" "fold" "\"$BIN\" info --checkpoint $CK --fold 3"
ck err "train-flag-and-set-bad" "train.lr|lr" "\"$BIN\" train $TINY --instruments 4 --timesteps 120 --features 3 --lr 1e-3 --set train.lr='\"x\"' -o $W/tfs"
ck err "train-split-order" "train_end|valid_end" "\"$BIN\" train $TINY --instruments 4 --timesteps 120 --features 3 --set split.train_end=0.9 --set split.valid_end=0.5 -o $W/tso"

# ---- 6. resume / overwrite combinations --------------------------------------------------------------------
cp -a precious/run scratch_run
ck ok "resume-finished-steps-up" "" "\"$BIN\" train --device cpu --threads 1 --resume $W/scratch_run --steps 12"
ck err "resume-finished" "finished|steps" "\"$BIN\" train --device cpu --threads 1 --resume $W/precious/run"
ck err "resume-other-dmodel" "d_model" "\"$BIN\" train --device cpu --threads 1 --resume $W/scratch_run --d-model 16 --steps 20"
ck err "resume-other-data" "data|csv" "\"$BIN\" train --device cpu --threads 1 --resume $W/scratch_run --set 'data.source=\"synthetic\"' --steps 20"
ck err "resume-checkpoint-file" "folder|resume|run" "\"$BIN\" train --device cpu --threads 1 --resume $CK"
ck err "resume-empty-folder" "adir|run|folder" "\"$BIN\" train --device cpu --threads 1 --resume $W/outs/adir"
ck err "resume-empty-string" "resume" "\"$BIN\" train --device cpu --threads 1 --resume ''"
ck err "resume-data-folder" "data|run" "\"$BIN\" train --device cpu --threads 1 --resume $W/precious/data"
ck err "resume-and-o-other" "-o|out|resume" "\"$BIN\" train --device cpu --threads 1 --resume $W/scratch_run -o $W/elsewhere --steps 20"
for t in run pop; do
  # --overwrite that fails early or late: the old run must stay whole.
  cp -a "precious/$t" "ow_$t"; H=$(cd "ow_$t" && find . -type f | sort | xargs md5sum | md5sum)
  i=0
  for bad in "--set model.d_model=-1" "--set 'data.csv=\"$W/csv/binary.csv\"'" "--steps 0" "--lr nan" \
             "--set 'data.csv=\"$W/csv/constant_features.csv\"'" "--set split.walk_forward_folds=50" ; do
    i=$((i + 1))
    timeout 40 bash -c "\"$BIN\" train $DATA $TINY --overwrite $bad -o $W/ow_$t" > out.log 2>&1; rc=$?
    H2=$(cd "ow_$t" && find . -type f | sort | xargs md5sum | md5sum)
    if [ $rc -ne 0 ] && [ "$H" != "$H2" ]; then note loss "overwrite-fails-$t-$i" "$bad: rc=$rc, the old run changed"; cp -a "precious/$t/." "ow_$t/"; H=$(cd "ow_$t" && find . -type f | sort | xargs md5sum | md5sum)
    elif [ $rc -ge 124 ]; then note crash "overwrite-fails-$t-$i" "rc=$rc"
    elif [ $rc -eq 0 ]; then note clear "overwrite-fails-$t-$i" "accepted: $bad"; rm -rf "ow_$t"; cp -a "precious/$t" "ow_$t"
    else note clear "overwrite-fails-$t-$i" "$(first_line out.log)"; fi
  done
  # Limits: the file size, the address space.
  for lim in "ulimit -f 4" "ulimit -f 16" "ulimit -f 64" "ulimit -v 1000000" "ulimit -v 1300000"; do
    timeout 40 bash -c "$lim; exec \"$BIN\" train $DATA ${MODEL/--d-model 8 --head-dim 4/} --d-model 32 --head-dim 8 --steps 8 --eval-every 4 --overwrite -o $W/ow_$t" > out.log 2>&1; rc=$?
    H2=$(cd "ow_$t" && find . -type f | sort | xargs md5sum | md5sum)
    if [ $rc -ne 0 ] && [ "$H" != "$H2" ]; then note loss "overwrite-$lim-$t" "rc=$rc, the old run changed: $(first_line out.log)"; rm -rf "ow_$t"; cp -a "precious/$t" "ow_$t"; H=$(cd "ow_$t" && find . -type f | sort | xargs md5sum | md5sum)
    elif [ $rc -ge 124 ] || grep -aqE 'terminate called|bad_alloc' out.log; then note crash "overwrite-$lim-$t" "rc=$rc $(first_line out.log)"
    elif [ $rc -eq 0 ]; then note clear "overwrite-$lim-$t" "fits"; rm -rf "ow_$t"; cp -a "precious/$t" "ow_$t"
    elif grep -aqE 'File too large|needs|memory|address space' out.log; then note clear "overwrite-$lim-$t" "$(first_line out.log)"
    else note unclear "overwrite-$lim-$t" "rc=$rc $(first_line out.log)"; fi
  done
done

# ---- 7. kills: signals at random moments, then resume ------------------------------------------------------
LONG="$DATA $MODEL --steps 400 --eval-every 50 --save-every 20"
RANDOM=37
for sig in KILL TERM INT HUP USR1 XCPU QUIT PIPE ALRM USR2; do
  for rep in 1 2 3; do
    d=$W/kill_${sig}_$rep; rm -rf "$d"
    delay=$(awk -v r=$RANDOM 'BEGIN{printf "%.2f", 0.05 + (r % 100) / 100.0 * 0.6}')
    eval "exec \"$BIN\" train $LONG -o $d" > out.log 2>&1 & pid=$!
    sleep "$delay"; kill -s "$sig" $pid 2>/dev/null; wait $pid; rc=$?
    name="kill-$sig-$rep@${delay}s"
    if [ ! -e "$d/run.json" ]; then
      # Killed before anything: a fresh start must work.
      timeout 60 bash -c "\"$BIN\" train $LONG -o $d" > out2.log 2>&1; rc2=$?
    else
      timeout 60 "$BIN" train --device cpu --threads 1 --resume "$d" > out2.log 2>&1; rc2=$?
    fi
    if [ $rc2 -eq 0 ]; then
      if eval "\"$BIN\" predict $DATA --device cpu --threads 1 --checkpoint $d/best.safetensors --split all -o $d/p" > /dev/null 2>&1; then
        if ls "$d"/*.tmp-* > /dev/null 2>&1; then note unclear "$name" "a *.tmp-* file is left after the resume"
        else note clear "$name" "rc=$rc, resumed"; fi
      else note loss "$name" "resumed but best.safetensors does not predict"; fi
    elif grep -aqE 'every model has finished|finished' out2.log; then note clear "$name" "rc=$rc, had finished"
    else note loss "$name" "rc=$rc; resume rc=$rc2: $(first_line out2.log)"; fi
  done
done

# ---- 8. MLALPHA_FAULT_AT: a kill at every durable write of a run, a population and an overwrite -------------
fault_sweep() {  # NAME ARGS_FOR_TRAIN (on folder $d) [PREP]
  local name=$1 args=$2 prep=${3:-}
  local d=$W/fault_$name
  rm -rf "$d"; eval "$prep"
  MLALPHA_FAULT_LOG=$W/faults_$name.log eval "\"$BIN\" train $args -o $d" > /dev/null 2>&1
  local n; n=$(wc -l < "$W/faults_$name.log" 2>/dev/null || echo 0)
  local step=1; [ "$n" -gt 24 ] && step=$(( n / 24 ))
  for ((k = 1; k <= n; k += step)); do
    rm -rf "$d"; eval "$prep"
    local oldh=""; [ -d "$d" ] && oldh=$(cd "$d" && find . -type f -not -name run.lock | sort | xargs md5sum | md5sum)
    MLALPHA_FAULT_AT=$k eval "\"$BIN\" train $args -o $d" > out.log 2>&1; local rc=$?
    # A half-written folder: info, predict and eval must be clear or work.
    ck any "fault-$name-$k-info" "run|checkpoint|safetensors|state|folder|No such" "\"$BIN\" info --checkpoint $d"
    ck any "fault-$name-$k-predict" "run|checkpoint|safetensors|No such|not exist" "\"$BIN\" predict $DATA --device cpu --threads 1 --checkpoint $d/best.safetensors --split all -o $W/fp"
    # Then a resume (or, when the kill came before any checkpoint, the same command again) must finish.
    if [ -e "$d/run.json" ] && [ -z "$oldh" ]; then
      timeout 60 "$BIN" train --device cpu --threads 1 --resume "$d" > out2.log 2>&1; rc2=$?
    elif [ -n "$oldh" ]; then
      # --overwrite killed: the old run is back whole (it resumes as a finished run), or the new one continues.
      timeout 60 "$BIN" train --device cpu --threads 1 --resume "$d" > out2.log 2>&1; rc2=$?
      newh=$(cd "$d" && find . -maxdepth 1 -type f -not -name run.lock | sort | xargs md5sum | md5sum)
    else
      timeout 60 bash -c "\"$BIN\" train $args ${oldh:+--overwrite} -o $d" > out2.log 2>&1; rc2=$?
    fi
    if [ $rc2 -eq 0 ] || grep -q 'every model has finished' out2.log; then note clear "fault-$name-$k" "rc=$rc, recovered"
    else note loss "fault-$name-$k" "kill at write $k: cannot continue: $(first_line out2.log)"; fi
  done
}
fault_sweep solo "$DATA $MODEL --steps 12 --eval-every 6 --save-every 4"
fault_sweep pop "$DATA $MODEL --steps 8 --eval-every 4 --models 2"
fault_sweep wf "$DATA $MODEL --steps 6 --eval-every 3 --set split.walk_forward_folds=2"
fault_sweep overwrite "$DATA $MODEL --steps 8 --eval-every 4 --overwrite" "cp -a $W/precious/run $W/fault_overwrite"

# ---- 9. concurrency: two runs on one folder, two streams on one state ----------------------------------------
for rep in 1 2 3 4 5; do
  d=$W/conc_$rep; rm -rf "$d"
  eval "exec \"$BIN\" train $DATA $MODEL --steps 100000000 --eval-every 0 -o $d" > c1.log 2>&1 & p1=$!
  sleep 0.$((rep + 2))
  case $rep in
    1|2) second="--overwrite -o $d" ;; 3) second="-o $d" ;; *) second="" ;;
  esac
  if [ -z "$second" ]; then
    timeout 30 "$BIN" train --device cpu --threads 1 --resume "$d" --steps 200000000 > c2.log 2>&1; r2=$?
  else
    timeout 30 bash -c "\"$BIN\" train $DATA $MODEL --steps 8 $second" > c2.log 2>&1; r2=$?
  fi
  kill -TERM $p1 2>/dev/null; wait $p1; r1=$?
  [ $r1 -eq 143 ] && r1=0  # stopped by us after the second run's answer
  if [ $r1 -eq 0 ] && [ $r2 -eq 0 ]; then note silent "concurrent-train-$rep" "both runs on one folder exited 0"
  elif [ $r1 -ne 0 ] && [ $r2 -ne 0 ]; then note unclear "concurrent-train-$rep" "both failed: $(first_line c1.log) | $(first_line c2.log)"
  elif grep -aqE 'lock|another|in use|running' c1.log c2.log; then note clear "concurrent-train-$rep" "one refused: lock named"
  else note unclear "concurrent-train-$rep" "$(first_line c1.log) | $(first_line c2.log)"; fi
  st=$W/conc_$rep.state
  (sleep 2; cat precious/live.csv) | "$BIN" stream --device cpu --threads 1 --checkpoint "$CK" --new-instruments --state "$st" -o "$W/cs1_$rep.csv" > s1.log 2>&1 & p1=$!
  sleep 0.5
  "$BIN" stream --device cpu --threads 1 --checkpoint "$CK" --new-instruments --state "$st" -i precious/live.csv -o "$W/cs2_$rep.csv" > s2.log 2>&1; r2=$?
  wait $p1; r1=$?
  if [ $r2 -ne 0 ] && grep -aqE 'lock|another|in use' s2.log; then note clear "concurrent-stream-$rep" "$(first_line s2.log)"
  elif [ $r2 -eq 0 ] && [ $r1 -eq 0 ]; then note silent "concurrent-stream-$rep" "two streams on one state both exited 0"
  else note unclear "concurrent-stream-$rep" "r1=$r1 r2=$r2 $(first_line s2.log)"; fi
done

# ---- 10. streams restarted with other settings, and killed mid-stream ---------------------------------------
S="--device cpu --threads 1 --checkpoint $CK"
SN="$S --new-instruments"
cp precious/s.state st_a.state
ck err "restart-mode-window" "mode|carry|window" "\"$BIN\" stream $S --mode window --state $W/st_a.state -i $W/csv/one_step.csv -o $W/ra.csv"
ck err "restart-fewer-instruments" "inst3|instruments" "\"$BIN\" stream $S --instruments inst0,inst1 --state $W/st_a.state -i $W/precious/live.csv -o $W/rb.csv"
ck err "restart-other-checkpoint" "checkpoint|state" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $W/precious/pop --state $W/st_a.state -i $W/precious/live.csv -o $W/rc.csv"
ck any "restart-other-ck-last" "checkpoint|state" "\"$BIN\" stream --device cpu --threads 1 --checkpoint $W/precious/run/last.safetensors --state $W/st_a.state -i $W/precious/live.csv -o $W/rd.csv"
ck any "restart-history-again" "history|state" "\"$BIN\" stream $S --history $W/precious/hist.csv --state $W/st_a.state -i $W/precious/live.csv -o $W/re.csv"
ck any "restart-old-rows" "time|line [0-9]|state" "\"$BIN\" stream $S --state $W/st_a.state -i $W/precious/live.csv -o $W/rf.csv"
ck any "restart-append-existing" "overwrite|exists|append" "\"$BIN\" stream $S --state $W/st_a.state -i $W/csv/one_step.csv -o $W/precious/stream_out.csv.copy"
head -c 100 precious/s.state > st_trunc.state; head -c 3000 /dev/urandom > st_rand.state; : > st_empty.state
for st in st_trunc st_rand st_empty; do
  ck err "stream-state-$st" "$st|state" "\"$BIN\" stream $S --state $W/$st.state -i $W/precious/live.csv -o $W/$st.csv"
  ck err "info-state-$st" "$st|state" "\"$BIN\" info --state $W/$st.state"
done
ck ok "info-state-good" "" "\"$BIN\" info --state $W/precious/s.state"
for sig in KILL TERM INT HUP USR1 PIPE; do
  for rep in 1 2; do
    st=$W/ks_${sig}_$rep.state; o=$W/ks_${sig}_$rep.csv; rm -f "$st" "$o"
    (cat precious/hist.csv; sleep 0.3; sed 1d precious/live.csv; sleep 5) | "$BIN" stream $SN --state "$st" -o "$o" > ks.log 2>&1 & pid=$!
    sleep "0.$((RANDOM % 6 + 1))"; kill -s "$sig" $pid 2>/dev/null; wait $pid 2>/dev/null
    before=$(md5sum < "$o" 2>/dev/null)
    lines_before=$(wc -l < "$o" 2>/dev/null || echo 0)
    if [ -e "$st" ]; then
      timeout 30 "$BIN" stream $S --state "$st" -i precious/live.csv -o "$o" > ks2.log 2>&1; rc2=$?
    else rc2=0; fi
    lines_after=$(wc -l < "$o" 2>/dev/null || echo 0)
    if [ "$lines_after" -lt "$lines_before" ]; then note loss "stream-kill-$sig-$rep" "the output lost rows on restart ($lines_before -> $lines_after)"
    elif [ $rc2 -eq 0 ] || grep -aqE 'line [0-9]|time' ks2.log; then note clear "stream-kill-$sig-$rep" "restart rc=$rc2"
    else note unclear "stream-kill-$sig-$rep" "$(first_line ks2.log)"; fi
  done
done

# ---- 11. ulimit on the stream and on synth; disk-full-like writes ---------------------------------------------
for lim in "ulimit -f 1" "ulimit -f 8" "ulimit -v 1000000" "ulimit -v 1300000"; do
  ck any "stream-$lim" "File too large|memory|space|stream" "$lim; exec \"$BIN\" stream $SN -i $W/precious/live.csv --state $W/lim.state -o $W/lim.csv"
  ck any "synth-$lim" "File too large|memory|space|panel" "$lim; exec \"$BIN\" synth --instruments 64 --timesteps 2000 --features 8 -o $W/lim_synth"
  ck any "predict-$lim" "File too large|memory|space|pred" "$lim; exec \"$BIN\" predict $DATA --device cpu --threads 1 --checkpoint $CK --split all -o $W/lim_pred"
  ck any "train-fresh-$lim" "File too large|memory|needs|space" "$lim; exec \"$BIN\" train $TINY $DATA -o $W/lim_run_\$RANDOM"
done

# ---- tally ---------------------------------------------------------------------------------------------------
T1=$(date +%s)
echo "----"
printf 'cases %d in %ds: clear %d, unclear %d, silent %d, crash/hang %d, data loss %d\n' "$N" $((T1 - T0)) \
  "${TALLY[clear]}" "${TALLY[unclear]}" "${TALLY[silent]}" "${TALLY[crash]}" "${TALLY[loss]}"
[ -n "${KEEP_REPORT:-}" ] && cp "$REPORT" "$KEEP_REPORT"
[ "${TALLY[loss]}" -eq 0 ] && [ "${TALLY[crash]}" -eq 0 ] && [ "${TALLY[silent]}" -le 5 ] && [ "${TALLY[unclear]}" -le 10 ]
