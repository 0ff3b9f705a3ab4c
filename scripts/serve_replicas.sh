#!/usr/bin/env bash
# Serving replicas: N `hxrt serve` processes behind nginx (docs/scale-out.md, "Replicas").
#
#   scripts/serve_replicas.sh N [--port 8080] [--base-port 8100] [--affinity] [--hxrt PATH] [-- hxrt serve flags...]
#
# Starts N replicas on 127.0.0.1:base-port .. base-port+N-1 (each `hxrt serve` with the flags after --), waits for
# each one's /health, then runs nginx in front of them on --port until SIGINT/SIGTERM, and stops everything.
# Balancing: least connections (a new request goes to the replica with the fewest in flight), or with --affinity a
# consistent hash of the client's X-Session-Id header, so that a conversation keeps reaching the replica whose
# prefix cache holds its earlier turns (requests without the header are spread by the hash of an empty key: send
# it). Health: nginx retires a replica that refuses a connection (max_fails=1, fail_timeout=10s), and this script
# polls every replica's /health each second and marks one that fails it `down` (nginx reloads its configuration),
# taking it back when it answers again.
#
# Needs nginx (Debian: nginx; scripts/install_deps.sh installs it). Runs as any user: nginx's files live in a
# temporary folder. The folder's path is printed; its logs/ holds nginx's error log.
set -euo pipefail

usage() {
  sed -n '2,5p' "$0" >&2
  exit 2
}

[[ $# -ge 1 ]] || usage
replicas=$1
shift
[[ $replicas =~ ^[1-9][0-9]*$ ]] || usage
port=8080
base_port=8100
affinity=0
root=$(cd "$(dirname "$0")/.." && pwd)
hxrt=${HXRT:-$root/build/tools/hxrt}
serve_flags=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --port) port=$2; shift 2 ;;
    --base-port) base_port=$2; shift 2 ;;
    --affinity) affinity=1; shift ;;
    --hxrt) hxrt=$2; shift 2 ;;
    --) shift; serve_flags=("$@"); break ;;
    *) usage ;;
  esac
done
[[ -x $hxrt ]] || { echo "serve_replicas: no hxrt at $hxrt (build it, or pass --hxrt)" >&2; exit 1; }
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
[[ -x $nginx_bin ]] || { echo "serve_replicas: nginx is not installed (apt-get install nginx)" >&2; exit 1; }

dir=$(mktemp -d -t hxrt-replicas.XXXXXX)
mkdir -p "$dir/logs" "$dir/temp"
pids=()
nginx_started=0
cleanup() {
  trap - EXIT INT TERM
  if ((nginx_started)); then "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" -s quit 2>/dev/null || true; fi
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  echo "serve_replicas: stopped" >&2
}
trap cleanup EXIT
trap 'exit 0' INT TERM

healthy() { curl -fsS -m 2 "http://127.0.0.1:$1/health" >/dev/null 2>&1; }

for ((i = 0; i < replicas; i++)); do
  p=$((base_port + i))
  "$hxrt" serve --host 127.0.0.1 --port "$p" "${serve_flags[@]}" >"$dir/logs/replica$i.log" 2>&1 &
  pids+=($!)
done
for ((i = 0; i < replicas; i++)); do
  p=$((base_port + i))
  for ((t = 0; t < 600; t++)); do
    healthy "$p" && break
    kill -0 "${pids[$i]}" 2>/dev/null || { echo "serve_replicas: replica $i exited:" >&2; tail -5 "$dir/logs/replica$i.log" >&2; exit 1; }
    sleep 0.2
  done
  healthy "$p" || { echo "serve_replicas: replica $i (port $p) never became healthy" >&2; exit 1; }
done

# The configuration, with the replicas marked down in $1 (a space-separated list of indices).
write_config() {
  local down=" $1 "
  {
    # As root, nginx's workers would run as nobody, who cannot use this user's temporary folder.
    if [[ $(id -u) == 0 ]]; then echo "user root;"; fi
    echo "worker_processes 1;"
    echo "pid $dir/nginx.pid;"
    echo "error_log $dir/logs/error.log warn;"
    echo "events { worker_connections 1024; }"
    echo "http {"
    echo "  access_log off;"
    echo "  client_body_temp_path $dir/temp/body; proxy_temp_path $dir/temp/proxy;"
    echo "  fastcgi_temp_path $dir/temp/fastcgi; uwsgi_temp_path $dir/temp/uwsgi; scgi_temp_path $dir/temp/scgi;"
    echo "  upstream hxrt {"
    if ((affinity)); then echo "    hash \$http_x_session_id consistent;"; else echo "    least_conn;"; fi
    for ((i = 0; i < replicas; i++)); do
      local mark=""
      [[ $down == *" $i "* ]] && mark=" down"
      echo "    server 127.0.0.1:$((base_port + i)) max_fails=1 fail_timeout=10s$mark;"
    done
    echo "    keepalive 32;"
    echo "  }"
    echo "  server {"
    echo "    listen 127.0.0.1:$port;"
    echo "    location / {"
    echo "      proxy_pass http://hxrt;"
    echo "      proxy_http_version 1.1;"
    echo "      proxy_set_header Connection \"\";"
    echo "      proxy_buffering off;"  # streamed completions pass through as they come
    echo "      proxy_read_timeout 600s;"
    echo "      proxy_next_upstream error timeout;"
    echo "    }"
    echo "  }"
    echo "}"
  } >"$dir/nginx.conf"
}

write_config ""
"$nginx_bin" -p "$dir" -c "$dir/nginx.conf" -t -q
"$nginx_bin" -p "$dir" -c "$dir/nginx.conf"
nginx_started=1
mode=$([[ $affinity == 1 ]] && echo "affinity by X-Session-Id" || echo "least connections")
echo "serve_replicas: $replicas replicas on ports $base_port..$((base_port + replicas - 1)), nginx on 127.0.0.1:$port ($mode); files in $dir" >&2

down=""
while true; do
  now=""
  for ((i = 0; i < replicas; i++)); do
    healthy $((base_port + i)) || now="$now $i"
  done
  if [[ $now != "$down" ]]; then
    down=$now
    echo "serve_replicas: replicas down:${down:- none}" >&2
    write_config "$down"
    "$nginx_bin" -p "$dir" -c "$dir/nginx.conf" -s reload
  fi
  sleep 1
done
