#!/bin/bash
# Terminals in a real sandbox (the libvirt driver, the tiny image), all in one VM: the
# WebSocket route (the login shell on a pts of the size asked for, as the sandbox user,
# resize, the exit status, cwd= and env=, no terminal with tty=false), `aas shell` in a real terminal
# (tmux: size, SIGWINCH, ^C for the remote shell, the exit status, the terminal restored)
# and with piped stdin, the E2B face's terminal and watch (e2b_pty.py), and a session whose
# sandbox is destroyed under it. Typed commands
# print 'A""B' so that the output (AB) is never the terminal's echo of the typing.
#
# usage: test_vm_pty.sh AAS_SERVER WSTOOL AAS IMAGE_DIR STATE_DIR
. "$(dirname "$0")/common.sh"
SERVER=$1
WSTOOL=$2
AAS=$3
IMAGES=$4
STATE=$5
admin() { "$SERVER" "$@" --state-dir "$STATE"; }
TMUX_SOCK="${WORK}/tmux.sock"
tm() { tmux -S "$TMUX_SOCK" "$@"; }

before_stop() {
	local ids
	ids=$(curl -s -H "Authorization: Bearer ${KEY:-}" "${BASE}/v1/sandboxes?status=active" | jq -r '.sandboxes[]?.id')
	for id in $ids; do curl -s -o /dev/null -X DELETE -H "Authorization: Bearer ${KEY}" "${BASE}/v1/sandboxes/${id}"; done
}
after_stop() { tm kill-server 2>/dev/null || :; "$(dirname "$0")/../vm-cleanup" "$STATE" >/dev/null 2>&1; }

[ -d "${IMAGES}/tiny" ] || { echo "no tiny image in ${IMAGES} (run the vmimage fixture)"; exit 1; }
command -v tmux >/dev/null || { echo "tmux is missing (scripts/lib/common.sh lists it)"; exit 1; }
"$(dirname "$0")/../vm-cleanup" "$STATE" >/dev/null 2>&1
mkdir -p "$STATE"
# One sandbox, never cloned: no template built beside it (a second boot for nothing).
start_server "$SERVER" --images "$IMAGES" --image tiny --state-dir "$STATE" --templates off
KEY=$(admin account create --name pty 2>/dev/null)
auth POST /v1/sandboxes -d '{"timeout":900,"envs":{"FROM_SB":"yes"}}'; expect_status 201 create; SB=$(jqr .id)
auth POST "/v1/sandboxes/${SB}/exec" -d '{"command":"id -un"}'; USER_EXEC=$(jqr .stdout | tr -d '\n')
PTY="/v1/sandboxes/${SB}/pty"
ws() { "$WSTOOL" pty 127.0.0.1 "$PORT" "$@"; }

# ---- the WebSocket route ----
OUT=$(ws "${PTY}?cols=100&rows=30&term=vt100" "$KEY" \
	'send:echo S""IZE $(stty size) $(tty) $TERM $(id -un)\r' 'wait:SIZE 30 100' \
	'text:{"type":"resize","cols":120,"rows":40}' 'send:echo N""OW $(stty size)\r' 'wait:NOW 40 120' \
	'send:exit 3\r')
RC=$?
check "a session in a real guest runs to its end ($RC)" test "$RC" = 0
LINE=$(grep -a 'SIZE 30 100' <<<"$OUT" | tail -n 1 | tr -d '\r')
check "a pts of the size asked for: $LINE" grep -q 'SIZE 30 100 /dev/pts/' <<<"$LINE"
check "TERM as asked: $LINE" grep -q ' vt100 ' <<<"$LINE"
check "the sandbox user's shell, as exec's ($USER_EXEC): $LINE" grep -q " ${USER_EXEC}\$" <<<"$LINE"
check "not root" test "$USER_EXEC" != root
check "a resize reaches the terminal" grep -aq 'NOW 40 120' <<<"$OUT"
check "the exit status comes before the close" grep -aq '^text: {"type":"exit","status":3}$' <<<"$OUT"
check "then a normal close" grep -aq '^close 1000 ' <<<"$OUT"
# cwd= and env= (a quote and a space in a value survive the guest's shell), after the sandbox's own envs.
OUT=$(ws "${PTY}?cwd=%2Ftmp&env=FOO%3Dit%27s%20here" "$KEY" 'send:echo W""HERE $(pwd) $FOO $FROM_SB\r' \
	"wait:WHERE /tmp it's here yes" 'send:exit\r')
check "cwd= and env= in a real guest, with the sandbox's envs: $OUT" grep -aq "WHERE /tmp it's here yes" <<<"$OUT"
OUT=$(ws "${PTY}?cwd=%2Fno%2Fsuch" "$KEY")
check "a directory the shell cannot enter ends it with 126: $OUT" grep -aq '"type":"exit","status":126' <<<"$OUT"
OUT=$(ws "${PTY}?tty=false" "$KEY" 'send:echo N""O $(tty); (exit 6)\n' 'wait:NO ' 'text:{"type":"eof"}')
check "tty=false: no terminal: $OUT" grep -aq 'NO not a tty' <<<"$OUT"
check "end-of-input ends it with its last status" grep -aq '"type":"exit","status":6' <<<"$OUT"

# ---- aas shell, piped ----
OUT=$(printf 'echo P""IPED\nexit 4\n' | "$AAS" --url "$BASE" --key "$KEY" shell "$SB"); RC=$?
check "aas shell piped: the shell's status ($RC)" test "$RC" = 4
check "and its output: $OUT" grep -q '^PIPED$' <<<"$OUT"

# ---- aas shell in a real terminal ----
cat >"${WORK}/term.sh" <<'SCRIPT'
#!/bin/bash
# term.sh DIR NAME AAS URL KEY ARGS...: aas shell ARGS, then its exit status and the terminal it left.
dir=$1 name=$2 aas=$3 url=$4 key=$5; shift 5
"$aas" --url "$url" --key "$key" shell "$@"
echo "exit=$?" >"$dir/$name.rc"
stty -a >"$dir/$name.stty"
sleep 600
SCRIPT
chmod +x "${WORK}/term.sh"
pane_has() { for _ in $(seq 1 600); do tm capture-pane -p -t "$1" | grep -q -- "$2" && return 0; sleep 0.2; done; return 1; }
file_has() { for _ in $(seq 1 600); do [ -s "$1" ] && grep -q -- "$2" "$1" && return 0; sleep 0.2; done; return 1; }
tm new-session -d -s one -x 100 -y 30 "${WORK}/term.sh" "$WORK" one "$AAS" "$BASE" "$KEY" "$SB"
tm send-keys -t one 'echo S""IZE $(stty size) $TERM' Enter
check "aas shell in tmux: the terminal's size" pane_has one 'SIZE 30 100'
tm resize-window -t one -x 120 -y 40
tm send-keys -t one 'echo N""OW $(stty size)' Enter
check "SIGWINCH resizes the remote terminal" pane_has one 'NOW 40 120'
tm send-keys -t one 'echo S""LEEPING; sleep 300' Enter
check "a long command runs" pane_has one '^SLEEPING'
tm send-keys -t one C-c
tm send-keys -t one 'echo A""FTER' Enter
check "^C interrupts the remote command (the shell answers before its 300 s)" pane_has one '^AFTER'
check "and leaves aas running" test ! -e "${WORK}/one.rc"
tm send-keys -t one 'exit 7' Enter
check "aas exits with the shell's status" file_has "${WORK}/one.rc" '^exit=7$'
check "and leaves the terminal as it found it" file_has "${WORK}/one.stty" ' icanon '

# ---- the E2B face: a terminal by pid (Start, SendInput, Update, the end), and watchDir ----
OUT=$(timeout 300 python3 "$(dirname "$0")/e2b_pty.py" "$BASE" "$KEY" "$SB" 2>&1)
check "E2B pty: started with a pid: $OUT" grep -q '^pty started True$' <<<"$OUT"
check "E2B pty: the size asked for, TERM, not root" grep -q '^size and user True True$' <<<"$OUT"
check "E2B pty: cwd and envs, and the sandbox's envs" grep -q '^cwd and envs True$' <<<"$OUT"
check "E2B pty: Update resizes it" grep -q '^resized True$' <<<"$OUT"
check "E2B pty: the shell's exit status in the end event, then the end-stream frame" \
	grep -q '^exit status 5 end-stream True$' <<<"$OUT"
check "E2B watchDir in the tiny image (no python3): failed_precondition saying so" \
	grep -q '^watch failed_precondition True$' <<<"$OUT"

# ---- a session whose sandbox goes away ----
ws "$PTY" "$KEY" 'send:echo H""ELD\r' 'wait:HELD' >"${WORK}/held" 2>&1 & PIDS+=($!); HELD=$!
check "a session is open" file_has "${WORK}/held" 'HELD'
auth DELETE "/v1/sandboxes/${SB}"; expect_status 200 "destroy the sandbox under it"
wait "$HELD"; RC=$?
check "the session ends when its sandbox does ($RC): $(tail -c 300 "${WORK}/held")" test "$RC" = 0
check "with no status to give" grep -aq '"type":"exit","status":-1' "${WORK}/held"

finish
