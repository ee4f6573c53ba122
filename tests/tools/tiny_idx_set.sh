# Sourced by the CLI tests that train: a small valid MNIST-style data set.
# tiny_idx_set DIR writes DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte,
# 8 training and 4 test images of 28x28 random bytes, labels 0..7 and 0..3.

make_idx() { # make_idx FILE KIND COUNT  (KIND 3 = images, 1 = labels)
  local f=$1 kind=$2 n=$3 hex
  hex=$(printf '%02x' "$n")
  if [[ $kind == 3 ]]; then
    printf "\\x00\\x00\\x08\\x03\\x00\\x00\\x00\\x$hex\\x00\\x00\\x00\\x1c\\x00\\x00\\x00\\x1c" >"$f"
    head -c $((n * 784)) /dev/urandom >>"$f"
  else
    printf "\\x00\\x00\\x08\\x01\\x00\\x00\\x00\\x$hex" >"$f"
    for ((i = 0; i < n; i++)); do printf "\\x0$((i % 10))" >>"$f"; done
  fi
}

tiny_idx_set() {
  mkdir -p "$1"
  make_idx "$1/train-images-idx3-ubyte" 3 8
  make_idx "$1/train-labels-idx1-ubyte" 1 8
  make_idx "$1/t10k-images-idx3-ubyte" 3 4
  make_idx "$1/t10k-labels-idx1-ubyte" 1 4
}
