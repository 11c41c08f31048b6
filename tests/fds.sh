# shellcheck shell=bash
# Sourced by the test harnesses that start daemons (libvirtd, sshd, PostgreSQL, aas-server).
#
# close_inherited_fds: closes every descriptor this shell inherited beyond
# stdin, stdout and stderr. A daemon started later would hold them for as
# long as it lives: a lock its caller holds (flock FILE ctest ...) stays held
# by a libvirtd long after the test. The shell's own descriptors (the script
# it reads) are close-on-exec, and an inherited one never is: those are left.
close_inherited_fds() {
	local f fd key value flags
	for f in /proc/$$/fd/*; do
		fd=${f##*/}
		case "$fd" in 0 | 1 | 2 | *[!0-9]*) continue ;; esac
		[ -e "/proc/$$/fdinfo/$fd" ] || continue
		flags=
		while read -r key value; do
			case "$key" in flags:) flags=$value ;; esac
		done <"/proc/$$/fdinfo/$fd"
		case "$flags" in '' | *[!0-7]*) ;; *) ((8#$flags & 8#2000000)) && continue ;; esac
		eval "exec $fd>&-"
	done
	return 0
}
close_inherited_fds
