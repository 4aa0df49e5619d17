#!/bin/sh
# test_cli.sh — command-line checks of `nabla`: each bad input gives exactly one error line on stderr
# naming the problem and a non-zero exit status below 128 (no crash); training the MLP and the CNN on a
# generated 8x8 IDX data set (bitwise reproducible checkpoints that load back in `nabla eval`); what
# --save and --metrics do with FIFOs, symlinks, modes and existing files; and, when it is installed, a
# short Fashion-MNIST run.
# Usage: test_cli.sh NABLA_BINARY WORK_DIR
set -u
NABLA=$1
WORK=$2
rm -rf "$WORK" && mkdir -p "$WORK" || exit 1
fails=0

# expect STATUS PATTERN -- ARGS...: exit status STATUS, one stderr line matching PATTERN (grep -E)
expect() {
  want=$1 pattern=$2
  shift 3
  "$NABLA" "$@" >"$WORK/out" 2>"$WORK/err"
  got=$?
  lines=$(wc -l <"$WORK/err")
  if [ "$got" -ne "$want" ] || [ "$lines" -ne 1 ] || ! grep -Eq -- "$pattern" "$WORK/err"; then
    echo "FAIL: nabla $* -> exit $got (want $want), $lines stderr lines (want 1), pattern '$pattern':"
    cat "$WORK/err"
    fails=$((fails + 1))
  else
    echo "ok: nabla $* -> $(cat "$WORK/err")"
  fi
}

# a little-endian u64, as printf escapes
u64le() {
  n=$1 out=""
  for _ in 1 2 3 4 5 6 7 8; do out="$out\\$(printf '%03o' $((n % 256)))"; n=$((n / 256)); done
  printf "$out"
}

expect 2 "unknown option '--bogus'" -- train --bogus
expect 2 "--lr expects a number.*'abc'" -- train --lr abc
expect 2 "--epochs expects an integer.*'0'" -- train --epochs 0
expect 2 "--model must be mlp or cnn" -- train --model rnn
expect 2 "--epochs needs a value" -- train --epochs
expect 2 "unknown command 'fly'" -- fly
expect 1 "dataset-fashion-mnist" -- train --data "$WORK/no-such-dir"

# a truncated IDX file: the header promises 60000 28x28 images, 200 bytes follow
mkdir -p "$WORK/trunc"
printf '\000\000\010\003\000\000\352\140\000\000\000\034\000\000\000\034' >"$WORK/trunc/train-images-idx3-ubyte"
head -c 200 /dev/zero >>"$WORK/trunc/train-images-idx3-ubyte"
printf '\000\000\010\001\000\000\352\140' >"$WORK/trunc/train-labels-idx1-ubyte"
expect 1 "train-images-idx3-ubyte.*(truncat|need [0-9]+ data bytes)" -- train --data "$WORK/trunc"
# a corrupted gzip stream
printf '\037\213\010\000garbage-garbage-garbage' >"$WORK/trunc/train-images-idx3-ubyte.gz"
expect 1 "train-images-idx3-ubyte.gz" -- train --data "$WORK/trunc"

# checkpoints: missing, not safetensors, and a model whose shapes do not match
expect 2 "--model FILE is required" -- eval
expect 1 "no-such.safetensors" -- eval --model "$WORK/no-such.safetensors"
echo "not a checkpoint" >"$WORK/junk.safetensors"
expect 1 "junk.safetensors" -- eval --model "$WORK/junk.safetensors"
header='{"fc1.weight":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}}'
{ u64le ${#header}; printf '%s' "$header"; head -c 16 /dev/zero; } >"$WORK/bad-shape.safetensors"
expect 1 "no 2-D tensor 'fc3.weight'" -- eval --model "$WORK/bad-shape.safetensors"

# ---- another IDX data set: 8x8 images of 4 classes (a bar at the top, bottom, left or right, plus
# noise), 400 training and 100 test images (the training images gzip'd), and a 3x3 set; made with
# python3's standard library
gen_idx() { # DIR SIZE
  python3 - "$1" "$2" <<'PY'
import gzip, os, random, struct, sys
d, size = sys.argv[1], int(sys.argv[2])
os.makedirs(d, exist_ok=True)
rng = random.Random(0)
def split(n):
    imgs, labs = bytearray(), bytearray()
    for i in range(n):
        c = i % 4
        for r in range(size):
            for k in range(size):
                on = (r == 0, r == size - 1, k == 0, k == size - 1)[c]
                imgs.append(rng.randint(190, 255) if on else rng.randint(0, 60))
        labs.append(c)
    return (struct.pack(">IIII", 0x803, n, size, size) + imgs, struct.pack(">II", 0x801, n) + labs)
for name, n in (("train", 400), ("t10k", 100)):
    img, lab = split(n)
    if name == "train":
        with gzip.open(os.path.join(d, "train-images-idx3-ubyte.gz"), "wb") as f: f.write(img)
    else:
        open(os.path.join(d, name + "-images-idx3-ubyte"), "wb").write(img)
    open(os.path.join(d, name + "-labels-idx1-ubyte"), "wb").write(lab)
PY
}
D8=$WORK/digits8 D3=$WORK/tiny3
if gen_idx "$D8" 8 && gen_idx "$D3" 3; then
  # train ARGS... -> the JSON line in $WORK/out, stderr in $WORK/err; fails when the run fails
  train_ok() {
    if "$NABLA" train --data "$D8" --epochs 2 --batch-size 16 --threads 2 --json "$@" >"$WORK/out" 2>"$WORK/err"; then
      acc=$(sed -n 's/.*"test_accuracy":\([0-9.]*\).*/\1/p' "$WORK/out")
      if [ -n "$acc" ] && awk "BEGIN { exit !($acc >= 0.9) }"; then echo "ok: nabla train $* on 8x8 images: test accuracy $acc"; return 0; fi
      echo "FAIL: nabla train $* on 8x8 images: test accuracy '$acc' below 0.9"
    else
      echo "FAIL: nabla train $* on 8x8 images:"; cat "$WORK/err"
    fi
    fails=$((fails + 1)); return 1
  }
  if "$NABLA" doctor --data "$D8" | grep -q '^dataset: *IDX files'; then echo "ok: doctor does not call the 8x8 set Fashion-MNIST"
  else echo "FAIL: doctor --data $D8"; "$NABLA" doctor --data "$D8"; fails=$((fails + 1)); fi
  train_ok --model mlp --seed 7 --save "$WORK/mlp8.safetensors" --metrics "$WORK/m8.csv"
  train_ok --model cnn --save "$WORK/cnn8.safetensors"
  for m in mlp cnn; do
    if "$NABLA" eval --model "$WORK/${m}8.safetensors" --data "$D8" >"$WORK/eval.log" 2>&1 &&
       grep -q "100 test images of 8x8, 4 classes" "$WORK/eval.log" && [ "$(grep -c '^[0-9] ' "$WORK/eval.log")" -eq 4 ] &&
       ! grep -Eq "Fashion|T-shirt|Trouser" "$WORK/eval.log"; then echo "ok: eval of the $m prints a 4x4 confusion matrix with class numbers"
    else echo "FAIL: eval of the $m on 8x8 images"; cat "$WORK/eval.log"; fails=$((fails + 1)); fi
  done
  # the compiled step (traced once, symbolic batch: 400 = 16 batches of 24 and a last one of 16) trains as eager
  train_ok --model mlp --seed 7 --batch-size 24 --compiled && cacc=$acc &&
  train_ok --model mlp --seed 7 --batch-size 24 >/dev/null && eacc=$acc &&
  if awk "BEGIN { d = $cacc - $eacc; exit !(d <= 0.02 && d >= -0.02) }"; then
    echo "ok: compiled and eager mlp reach test accuracy $cacc and $eacc"
  else echo "FAIL: compiled mlp test accuracy $cacc, eager $eacc"; fails=$((fails + 1)); fi
  train_ok --model cnn --batch-size 24 --compiled
  # the same seed and threads give the same weights
  "$NABLA" train --data "$D8" --epochs 2 --batch-size 16 --threads 2 --seed 7 --save "$WORK/again.safetensors" >/dev/null 2>&1
  if cmp -s "$WORK/mlp8.safetensors" "$WORK/again.safetensors"; then echo "ok: same seed and threads give identical weights"
  else echo "FAIL: checkpoints of two identical runs differ"; fails=$((fails + 1)); fi
  if [ "$(head -c 8 "$WORK/m8.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] &&
     [ "$(head -1 "$WORK/m8.csv")" = "epoch,loss,train_accuracy,test_accuracy,seconds" ] &&
     [ "$(wc -l <"$WORK/m8.csv")" -eq 3 ]; then echo "ok: metrics CSV (header and 2 epochs) and PNG chart"
  else echo "FAIL: metrics CSV or chart"; fails=$((fails + 1)); fi
  expect 1 "'fc1.weight' has shape \[256, 64\] but the mlp model needs \[256, 9\]" -- eval --model "$WORK/mlp8.safetensors" --data "$D3"
  expect 1 "cnn needs images of at least 4x4.*3x3" -- train --model cnn --data "$D3"

  # on a terminal narrower than the progress line, the redrawn line still fits (script(1) gives a pty)
  esc=$(printf '\033')
  for c in 30 60; do
    script -qec "stty cols $c rows 20; '$NABLA' train --data '$D8' --epochs 1 --batch-size 1 --threads 1" /dev/null >"$WORK/tty.log" 2>&1
    w=$(tr '\r' '\n' <"$WORK/tty.log" | grep "$esc\[K" | grep -v "^$esc" | sed "s/$esc\[K//g" |
        awk '{ if (length($0) > m) m = length($0) } END { print m + 0 }')
    if [ "$w" -gt 0 ] && [ "$w" -lt "$c" ]; then echo "ok: on a $c-column terminal the progress line is $w wide"
    else echo "FAIL: on a $c-column terminal the progress line is $w wide"; fails=$((fails + 1)); fi
  done

  # ---- what is at the output paths
  expect 1 "cannot write the checkpoint.*directory is missing" -- train --data "$D8" --save "$WORK/no-such-dir/x.safetensors"
  mkfifo "$WORK/fifo"   # stands for a device node such as /dev/full: not a regular file
  expect 1 "cannot write the checkpoint .*fifo: it exists and is not a regular file" -- train --data "$D8" --save "$WORK/fifo"
  expect 1 "cannot write the metrics file .*fifo: it exists and is not a regular file" -- train --data "$D8" --metrics "$WORK/fifo"
  if [ -p "$WORK/fifo" ]; then echo "ok: the FIFO is still a FIFO"; else echo "FAIL: the FIFO was replaced"; fails=$((fails + 1)); fi
  echo old >"$WORK/real.safetensors" && chmod 640 "$WORK/real.safetensors" && ln -s real.safetensors "$WORK/link.safetensors"
  echo "epoch,loss,train_accuracy,test_accuracy,seconds" >"$WORK/mlink-target.csv" && chmod 604 "$WORK/mlink-target.csv"
  ln -s mlink-target.csv "$WORK/mlink.csv"
  if train_ok --save "$WORK/link.safetensors" --metrics "$WORK/mlink.csv" >/dev/null &&
     [ -L "$WORK/link.safetensors" ] && [ "$(stat -c %a "$WORK/real.safetensors")" = 640 ] &&
     [ -L "$WORK/mlink.csv" ] && [ "$(stat -c %a "$WORK/mlink-target.csv")" = 604 ] &&
     [ "$(wc -l <"$WORK/mlink-target.csv")" -eq 3 ] &&
     "$NABLA" eval --model "$WORK/real.safetensors" --data "$D8" >/dev/null 2>&1; then
    echo "ok: --save and --metrics write through symlinks and keep the files' modes"
  else echo "FAIL: symlinked outputs"; ls -l "$WORK"; fails=$((fails + 1)); fi
  printf 'epoch,loss\n1,keep me\n' >"$WORK/keep.csv"
  expect 1 "dataset-fashion-mnist" -- train --data "$WORK/no-such-dir" --metrics "$WORK/keep.csv"
  if [ "$(cat "$WORK/keep.csv")" = "$(printf 'epoch,loss\n1,keep me')" ]; then echo "ok: a failing run leaves the metrics file intact"
  else echo "FAIL: a failing run changed the metrics file:"; cat "$WORK/keep.csv"; fails=$((fails + 1)); fi
else
  echo "FAIL: could not generate the IDX test data (python3)"; fails=$((fails + 1))
fi

# Fashion-MNIST itself, when installed: a short run and its 10x10 confusion matrix with the class names
if "$NABLA" doctor | grep -q '^dataset: *Fashion-MNIST'; then
  if "$NABLA" train --limit 1024 --epochs 1 --threads 2 --save "$WORK/fm.safetensors" >"$WORK/train.log" 2>&1 &&
     "$NABLA" eval --model "$WORK/fm.safetensors" >"$WORK/eval.log" 2>&1 && grep -q "test accuracy" "$WORK/eval.log" &&
     [ "$(grep -c '^[0-9] ' "$WORK/eval.log")" -eq 10 ] && grep -q "Ankle boot" "$WORK/eval.log"; then
    echo "ok: Fashion-MNIST: eval prints accuracy and a 10x10 confusion matrix with class names"
  else echo "FAIL: Fashion-MNIST run or eval"; cat "$WORK/train.log" "$WORK/eval.log"; fails=$((fails + 1)); fi
else
  echo "skip: Fashion-MNIST is not installed (dataset-fashion-mnist)"
fi

[ "$fails" -eq 0 ] && echo "all command-line checks passed"
exit "$fails"
