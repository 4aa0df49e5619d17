#!/bin/sh
# test_cli.sh — command-line checks of `nabla`: each bad input gives exactly one error line on stderr
# naming the problem and a non-zero exit status below 128 (no crash); plus a tiny training run whose
# checkpoint is bitwise reproducible and loads back in `nabla eval`.
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
expect 1 "'fc1.weight' has shape \[2, 2\] but the mlp model needs \[256, 784\]" -- eval --model "$WORK/bad-shape.safetensors"

# the remaining checks need the data set
if "$NABLA" doctor | grep -q '^dataset: *Fashion-MNIST'; then
  expect 1 "cannot write the checkpoint" -- train --limit 256 --epochs 1 --save "$WORK/no-such-dir/x.safetensors"
  for run in 1 2; do
    "$NABLA" train --limit 1024 --epochs 1 --seed 7 --threads 2 --save "$WORK/run$run.safetensors" \
      --metrics "$WORK/m$run.csv" >"$WORK/train$run.log" 2>&1 || { echo "FAIL: training run $run"; cat "$WORK/train$run.log"; fails=$((fails + 1)); }
  done
  if cmp -s "$WORK/run1.safetensors" "$WORK/run2.safetensors"; then echo "ok: same seed and threads give identical weights"
  else echo "FAIL: checkpoints of two identical runs differ"; fails=$((fails + 1)); fi
  if [ "$(head -c 8 "$WORK/m1.png" | od -An -tx1 | tr -d ' \n')" = "89504e470d0a1a0a" ] &&
     [ "$(head -1 "$WORK/m1.csv")" = "epoch,loss,train_accuracy,test_accuracy,seconds" ]; then echo "ok: metrics CSV and PNG chart"
  else echo "FAIL: metrics CSV or chart"; fails=$((fails + 1)); fi
  if "$NABLA" eval --model "$WORK/run1.safetensors" >"$WORK/eval.log" 2>&1 && grep -q "test accuracy" "$WORK/eval.log" &&
     [ "$(grep -c '^[0-9] ' "$WORK/eval.log")" -eq 10 ]; then echo "ok: eval prints accuracy and a 10x10 confusion matrix"
  else echo "FAIL: eval"; cat "$WORK/eval.log"; fails=$((fails + 1)); fi
else
  echo "skip: Fashion-MNIST is not installed (dataset-fashion-mnist)"
fi

[ "$fails" -eq 0 ] && echo "all command-line checks passed"
exit "$fails"
