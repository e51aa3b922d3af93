# Sourced by the .ci scripts that drive a real client against a fresh stoker:
#   start_stoker BIN FIRST_PORT NAME [SERVE-ARGS...]
# starts `BIN serve [SERVE-ARGS...]` in a temp dir ($work) on the first free loopback port from FIRST_PORT
# (100 tried, each checked with ss), waits until it listens, and sets $work, $pid, $port and
# $password (the first-start admin password); the EXIT trap stops it by PID and removes $work.
#   fuel_client_config
# then points python-fuelclient at it through $XDG_CONFIG_HOME (never ~/.config) and clears
# the environment variables that would override that file or send requests through a proxy.
#   fuel_client_venv VENV     sets $py, $fuel2, $fuel (exits when VENV has no client)
#   wait_task ID              waits for a transaction to end; prints its status
#   node_ids N                waits until N nodes are listed; prints their ids, sorted

work=
pid=
stop_stoker() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  [ -z "$work" ] || rm -rf "$work"
}
trap stop_stoker EXIT

start_stoker() {
  local bin=$1 first=$2 name=$3 p
  shift 3
  work=$(mktemp -d)
  port=
  # A port that ss shows free can still be taken before the daemon binds it (CI runs several
  # of these scripts at once): a daemon that exits without listening is tried on the next one.
  for p in $(seq "$first" $((first + 99))); do
    ss -ltn "( sport = :$p )" | grep -q ":$p" && continue
    (cd "$work" && exec "$bin" serve --http-listen "127.0.0.1:$p" "$@" >"$work/daemon.log" 2>&1) &
    pid=$!
    for _ in $(seq 100); do
      [ -s "$work/stoker-data/initial-admin-password" ] && grep -q "listening on" "$work/daemon.log" && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.2
    done
    if kill -0 "$pid" 2>/dev/null; then port=$p; break; fi
    wait "$pid" 2>/dev/null || true
    pid=
    grep -qi 'address.*in use' "$work/daemon.log" || { cat "$work/daemon.log" >&2; echo "$name: the daemon did not start" >&2; exit 1; }
  done
  [ -n "$port" ] || { echo "$name: no free port in $first-$((first + 99))" >&2; exit 1; }
  password=$(cat "$work/stoker-data/initial-admin-password")
}

fuel_client_config() {
  export XDG_CONFIG_HOME="$work/xdg" PYTHONWARNINGS=ignore
  mkdir -p "$XDG_CONFIG_HOME/fuel"
  cat >"$XDG_CONFIG_HOME/fuel/fuel_client.yaml" <<CONF
SERVER_ADDRESS: "127.0.0.1"
SERVER_PORT: "$port"
OS_USERNAME: "admin"
OS_PASSWORD: "$password"
OS_TENANT_NAME: "admin"
HTTP_PROXY: null
HTTP_TIMEOUT: 30
CONF
  unset SERVER_ADDRESS SERVER_PORT LISTEN_PORT KEYSTONE_USER KEYSTONE_PASS \
    FUELCLIENT_CUSTOM_SETTINGS HTTP_PROXY http_proxy https_proxy no_proxy HTTPS_PROXY NO_PROXY
}

# fuel_client_venv VENV: the client's programs ($py, $fuel2, $fuel) in VENV; exits when it has
# none.
fuel_client_venv() {
  py=$1/bin/python fuel2=$1/bin/fuel2 fuel=$1/bin/fuel
  [ -x "$fuel2" ] && [ -x "$fuel" ] || { echo "no python-fuelclient at $1" >&2; exit 1; }
}

# wait_task ID: until transaction ID is no longer running or pending (at most 180 s); prints
# its status.
wait_task() {
  local status=running
  for _ in $(seq 360); do
    status=$("$fuel2" task show -f value -c status "$1" 2>/dev/null || echo unknown)
    [ "$status" = running ] || [ "$status" = pending ] || break
    sleep 0.5
  done
  echo "$status"
}

# node_ids N: waits (at most 30 s) until fuel2 lists N nodes; prints their ids, sorted.
node_ids() {
  for _ in $(seq 100); do
    [ "$("$fuel2" node list -f value -c id 2>/dev/null | wc -l)" -ge "$1" ] && break
    sleep 0.3
  done
  "$fuel2" node list -f value -c id | sort -n
}
