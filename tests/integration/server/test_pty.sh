#!/bin/bash
# Terminals over the real server binary with the fake VM driver, whose shell echoes, reports
# resizes and ends at "exit N": GET /v1/sandboxes/{id}/pty through aas-wstool (frames both ways,
# resize, end-of-input, the exit message, cwd and env, every refusal and bound), and `aas shell` both with
# piped stdin and inside a real terminal (tmux): raw mode, SIGWINCH, the exit status, and the
# terminal restored on every way out.
#
# usage: test_pty.sh AAS_SERVER_FAKE WSTOOL AAS
. "$(dirname "$0")/common.sh"
SERVER=$1
WSTOOL=$2
AAS=$3
admin() { "$SERVER" "$@" --state-dir "${WORK}/state"; }
TMUX_SOCK="${WORK}/tmux.sock"
tm() { tmux -S "$TMUX_SOCK" "$@"; }
after_stop() { tm kill-server 2>/dev/null || :; }

# Bounds set low (and so shown to be options): 2 terminals per sandbox, 4 KiB frames, 1 s of a shell taking no input.
start_server "$SERVER" --pty-per-sandbox 2 --pty-frame-max 4096 --pty-write-timeout 1
KEY=$(admin account create --name alice 2>/dev/null)
OTHER=$(admin account create --name mallory 2>/dev/null)
auth POST /v1/sandboxes -d '{"timeout":600}'; expect_status 201 create; SB=$(jqr .id)
auth POST /v1/sandboxes -d '{"timeout":600}'; expect_status 201 "a second sandbox"; SB2=$(jqr .id)
PTY="/v1/sandboxes/${SB}/pty"
ws() { "$WSTOOL" pty 127.0.0.1 "$PORT" "$@"; }

# ---- the WebSocket ----
OUT=$(ws "${PTY}?cols=100&rows=30&term=vt100" "$KEY" 'wait:fake-shell' 'send:hello\r' 'wait:hello' \
	'text:{"type":"resize","cols":120,"rows":40}' 'wait:resize 120x40' 'send:exit 7\r')
RC=$?
check "a session runs to its end ($RC)" test "$RC" = 0
check "the shell got TERM and the size asked for: $OUT" grep -q 'fake-shell vt100 100x30 tty' <<<"$OUT"
check "keystrokes reach the shell and its echo comes back" grep -q 'hello' <<<"$OUT"
check "a resize message resizes the terminal" grep -q 'resize 120x40' <<<"$OUT"
check "the exit message carries the status" grep -q '^text: {"type":"exit","status":7}$' <<<"$OUT"
check "then a normal close" grep -q '^close 1000 ' <<<"$OUT"
OUT=$(ws "${PTY}" "$KEY" 'wait:fake-shell' close)
check "defaults: xterm-256color, 80x24: $OUT" grep -q 'fake-shell xterm-256color 80x24 tty' <<<"$OUT"
check "a client that closes first gets a close back" grep -q '^close 1000' <<<"$OUT"
OUT=$(ws "${PTY}?tty=false" "$KEY" 'wait:notty' 'send:echo piped\n' 'text:{"type":"eof"}')
check "tty=false: no terminal: $OUT" grep -q 'fake-shell xterm-256color 80x24 notty' <<<"$OUT"
check "end-of-input ends a shell without a terminal, status 0" grep -q '"type":"exit","status":0' <<<"$OUT"

# ---- the directory and variables (cwd=, env= once each); the fake shell answers pwd and echo $NAME ----
auth POST /v1/sandboxes -d '{"timeout":600,"envs":{"FROM_SANDBOX":"sb","BOTH":"sandbox"}}'; expect_status 201 "a sandbox with envs"
SB3=$(jqr .id)
OUT=$(ws "/v1/sandboxes/${SB3}/pty?cwd=%2Ftmp%2Fwork%20dir&env=FOO%3Dbar%26baz&env=BOTH%3Dterminal" "$KEY" \
	'wait:fake-shell' 'send:pwd\r' 'wait:work dir' 'send:echo $FOO\r' 'wait:bar&baz' 'send:echo $BOTH\r' 'wait:terminal' \
	'send:echo $FROM_SANDBOX\r' 'wait:sb' 'send:exit\r')
LINES=$(tr '\r' '\n' <<<"$OUT")
check "cwd= starts the shell there: $OUT" grep -axq '/tmp/work dir' <<<"$LINES"
check "env= adds a variable" grep -axq 'bar&baz' <<<"$LINES"
check "its own win over the sandbox's" grep -axq 'terminal' <<<"$LINES"
check "the sandbox's envs reach a terminal as a command" grep -axq 'sb' <<<"$LINES"
OUT=$(ws "/v1/sandboxes/${SB3}/pty?cwd=proj" "$KEY" 'wait:fake-shell' 'send:pwd\r' 'wait:/proj' 'send:exit\r')
check "a relative cwd is under /workspace: $OUT" grep -aq '/workspace/proj' <<<"$OUT"
for q in "env=1X%3Dy" "env=NOEQ" "env=A%3Db%00c" "cwd=" "cwd=%2Ftmp%01x" "cwd=a&cwd=b"; do
	OUT=$(ws "/v1/sandboxes/${SB3}/pty?$q" "$KEY"); check "?$q is refused: $OUT" grep -q '^status 400' <<<"$OUT"
done
check "and says why" grep -q 'invalid_argument' <<<"$OUT"
auth DELETE "/v1/sandboxes/${SB3}"; expect_status 200 "destroy the sandbox with envs"

# ---- refusals, as JSON errors before any upgrade ----
OUT=$(ws "/v1/sandboxes/sbx-nope/pty" "$KEY"); check "an unknown sandbox: $OUT" grep -q '^status 404' <<<"$OUT"
check "the 404 is a JSON error" grep -q '"code":"not_found"' <<<"$OUT"
OUT=$(ws "$PTY" "$OTHER"); check "another account's sandbox is 404: $OUT" grep -q '^status 404' <<<"$OUT"
OUT=$(ws "$PTY" "aas_sk_wrong"); check "a bad key is 401: $OUT" grep -q '^status 401' <<<"$OUT"
for q in "cols=0" "cols=4097" "rows=x" "term=a;b" "term=" "tty=maybe" "cols=80&cols=90"; do
	OUT=$(ws "${PTY}?$q" "$KEY"); check "?$q is refused: $OUT" grep -q '^status 400' <<<"$OUT"
done
auth GET "$PTY"; expect_status 400 "a plain GET (no upgrade)"
expect_json .error.code invalid_argument "it says why"
auth GET "$PTY" -H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' \
	-H 'Sec-WebSocket-Version: 8'
expect_status 400 "another WebSocket version"
check "the answer names the version it takes" grep -qi '^Sec-WebSocket-Version: 13' <<<"$HEADERS"
auth GET "$PTY" -H 'Connection: Upgrade' -H 'Upgrade: websocket' -H 'Sec-WebSocket-Key: short' \
	-H 'Sec-WebSocket-Version: 13'
expect_status 400 "a key that is not 16 bytes"
auth DELETE "/v1/sandboxes/${SB2}"; expect_status 200 "destroy the second sandbox"
OUT=$(ws "/v1/sandboxes/${SB2}/pty" "$KEY"); check "a destroyed sandbox has no terminal: $OUT" grep -Eq '^status 4(09|04)' <<<"$OUT"

# ---- bounds ----
OUT=$(ws "$PTY" "$KEY" "big:4097"); check "a frame over --pty-frame-max closes with 1009: $OUT" grep -q '^close 1009 frame over 4096 bytes' <<<"$OUT"
OUT=$(ws "$PTY" "$KEY" "big:4096" 'wait:xxxx' close); check "a frame at the bound is taken: ${OUT:0:200}" grep -q '^close 1000' <<<"$OUT"
# A shell that reads no input ("hold"), fed until the buffers between are full: the terminal is
# closed after --pty-write-timeout, saying why, and its place (and thread) is free again (below).
FLOOD=(); for _ in $(seq 1 300); do FLOOD+=("big:4000"); done
OUT=$(ws "$PTY" "$KEY" 'wait:fake-shell' 'send:hold\r' 'wait:hold' "${FLOOD[@]}" 2>&1)
check "a shell that takes no input closes with 1008: $(tail -c 200 <<<"$OUT")" grep -q '^close 1008 the shell took no input for 1 s' <<<"$OUT"
OUT=$(ws "$PTY" "$KEY" 'plain:{"type":"eof"}'); check "an unmasked frame closes with 1002: $OUT" grep -q '^close 1002' <<<"$OUT"
OUT=$(ws "$PTY" "$KEY" 'text:{"type":"dance"}'); check "an unknown message closes with 1003: $OUT" grep -q '^close 1003' <<<"$OUT"
OUT=$(ws "$PTY" "$KEY" 'text:{"type":"resize","cols":0,"rows":5}'); check "a bad resize closes with 1003" grep -q '^close 1003' <<<"$OUT"
HOLD=()
for n in 1 2; do
	"$WSTOOL" pty 127.0.0.1 "$PORT" "$PTY" "$KEY" 'wait:never comes' >"${WORK}/hold$n" 2>&1 & HOLD+=($!); PIDS+=($!)
done
for n in 1 2; do
	for _ in $(seq 1 100); do grep -q fake-shell "${WORK}/hold$n" && break; sleep 0.1; done
	check "terminal $n of 2 opens (every ended one gave its place back)" grep -q fake-shell "${WORK}/hold$n"
done
OUT=$(ws "$PTY" "$KEY"); check "a third terminal on one sandbox is 429 (--pty-per-sandbox 2): $OUT" grep -q '^status 429' <<<"$OUT"
check "it names the limit" grep -q '"limit":"pty_sessions"' <<<"$OUT"
check "and the bound" grep -q 'at most 2 terminals per sandbox and 16 per account' <<<"$OUT"
kill "${HOLD[@]}" 2>/dev/null; wait "${HOLD[@]}" 2>/dev/null
for _ in $(seq 1 100); do OUT=$(ws "$PTY" "$KEY" 'wait:fake-shell' close 2>&1) && break; sleep 0.1; done
check "closed sessions give their places back: $OUT" grep -q 'fake-shell' <<<"$OUT"

# ---- aas shell, stdin not a terminal ----
export AAS_BASE_URL="$BASE" AAS_API_KEY="$KEY"
OUT=$(printf 'echo one\nexit 3\n' | "$AAS" shell "$SB"); RC=$?
check "aas shell exits with the shell's status ($RC)" test "$RC" = 3
check "without a terminal it asks for none: $OUT" grep -q 'fake-shell xterm-256color 80x24 notty' <<<"$OUT"
OUT=$(printf 'echo one\n' | "$AAS" shell "$SB"); RC=$?
check "end of the piped input ends the shell: status 0 ($RC)" test "$RC" = 0
OUT=$(printf 'exit 4\r' | "$AAS" shell -t "$SB"); RC=$?
check "-t asks for a terminal even so ($RC): $OUT" grep -q ' tty' <<<"$OUT"
# --cwd and -e travel as the WebSocket's cwd= and env= (escaped: a space, '&' and '=' in a value).
OUT=$(printf 'pwd\necho $FOO\necho $BAR\nexit\n' |
	"$AAS" shell "$SB" --cwd 'proj dir' -e 'FOO=a b&c=d' --env BAR=2); RC=$?
LINES=$(tr -d '\r' <<<"$OUT")
check "aas shell --cwd -e: status 0 ($RC)" test "$RC" = 0
check "aas shell --cwd: relative under /workspace: $OUT" grep -axq '/workspace/proj dir' <<<"$LINES"
check "aas shell -e: the value as given: $OUT" grep -axq 'a b&c=d' <<<"$LINES"
check "aas shell --env: another: $OUT" grep -axq '2' <<<"$LINES"
"$AAS" shell "$SB" -e '1X=y' </dev/null 2>/dev/null; RC=$?
check "aas shell -e with a bad name is a usage error ($RC)" test "$RC" = 2
"$AAS" shell sbx-nope </dev/null 2>/dev/null; RC=$?
check "an unknown sandbox exits 4 ($RC)" test "$RC" = 4
"$AAS" shell </dev/null 2>/dev/null; RC=$?
check "no sandbox id is a usage error ($RC)" test "$RC" = 2
"$AAS" shell "$SB" --key aas_sk_wrong </dev/null 2>/dev/null; RC=$?
check "a bad key exits 3 ($RC)" test "$RC" = 3

# ---- aas shell in a real terminal ----
# Each run writes its exit status and then `stty -a` of the terminal it leaves behind.
cat >"${WORK}/term.sh" <<'SCRIPT'
#!/bin/bash
# term.sh DIR NAME AAS URL KEY ARGS...: aas shell ARGS, its pid, then its exit status and the terminal it left.
dir=$1 name=$2 aas=$3 url=$4 key=$5; shift 5
bash -c 'echo $$ >"$0"; exec "$@"' "$dir/$name.pid" "$aas" --url "$url" --key "$key" shell "$@"
echo "exit=$?" >"$dir/$name.rc"
stty -a >"$dir/$name.stty"
sleep 600
SCRIPT
chmod +x "${WORK}/term.sh"
run_in_tmux() { # run_in_tmux NAME [aas shell args...]
	local name=$1; shift
	tm new-session -d -s "$name" -x 100 -y 30 "${WORK}/term.sh" "$WORK" "$name" "$AAS" "$BASE" "$KEY" "$@"
}
pane_has() { # pane_has NAME TEXT: wait for TEXT on the pane
	for _ in $(seq 1 200); do tm capture-pane -p -t "$1" | grep -q -- "$2" && return 0; sleep 0.1; done
	return 1
}
file_has() { for _ in $(seq 1 200); do [ -s "$1" ] && grep -q -- "$2" "$1" && return 0; sleep 0.1; done; return 1; }
run_in_tmux one "$SB"
check "in a terminal: a tty of the terminal's size" pane_has one 'fake-shell [a-z0-9-]* 100x30 tty'
tm send-keys -t one 'typed' ; check "keys reach the shell and echo back" pane_has one 'typed'
tm resize-window -t one -x 120 -y 40
check "SIGWINCH becomes a resize" pane_has one 'resize 120x40'
# Raw: ^C is a byte for the remote shell, not a signal for aas.
tm send-keys -t one C-c Enter 'exit 5' Enter
check "the shell's status is aas's, ^C did not end it" file_has "${WORK}/one.rc" '^exit=5$'
check "the terminal is restored (cooked, echoing)" file_has "${WORK}/one.stty" ' icanon '
check "and echoes again" grep -q ' echo ' "${WORK}/one.stty"
run_in_tmux two "$SB"
check "a second terminal" pane_has two 'fake-shell'
kill -TERM "$(cat "${WORK}/two.pid")" 2>/dev/null || :
check "SIGTERM: aas exits 143" file_has "${WORK}/two.rc" '^exit=143$'
check "and leaves the terminal restored" file_has "${WORK}/two.stty" ' icanon '

# ---- a server that stops ends its terminals, saying why ----
"$WSTOOL" pty 127.0.0.1 "$PORT" "$PTY" "$KEY" 'wait:fake-shell' >"${WORK}/stopping" 2>&1 & PIDS+=($!); LAST=$!
check "a terminal is open" file_has "${WORK}/stopping" 'fake-shell'
stop_server; RC=$?
check "the server stops with a terminal open ($RC)" test "$RC" = 0
wait "$LAST"
check "the terminal is closed with 1001: $(tail -c 200 "${WORK}/stopping")" grep -q '^close 1001 the server is shutting down' "${WORK}/stopping"

finish
