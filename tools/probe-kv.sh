for round in 1 2 3; do
  for f in --kv-f16 --kv-f32; do
    r=$(llama-decode --config 1b --bench --device NVIDIA $f 2>&1 | grep -o '[0-9.]* us/token GPU')
    echo "round $round $f: $r"
  done
done
