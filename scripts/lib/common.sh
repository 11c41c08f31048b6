# Shared by the scripts: package installation and build helpers.
# shellcheck shell=bash

# Packages the build, the tests and the quick start need, by Debian name.
SAAS_BUILD_PACKAGES=(
	build-essential cmake pkg-config clang python3 libcmark-gfm-dev libcmark-gfm-extensions-dev
	libsqlite3-dev libpq-dev libcmocka-dev libjansson-dev libcurl4-openssl-dev
	libmicrohttpd-dev libssh2-1-dev libvirt-dev
	libsodium-dev # aas-server: Argon2id password hashes (accounts for people)
	zlib1g-dev # aas-server: E2B's gzip uploads, inflated as they come
)
# The sanitizer build uses clang 19: its AddressSanitizer locks its allocator
# around fork(), and libvirt's embedded driver forks (to start QEMU) from our
# threaded process. Under clang 14's, a child forked while another thread was
# in malloc could hang forever in its own malloc, and the create with it.
SAAS_TEST_PACKAGES=(postgresql valgrind curl jq python3-jsonschema openssh-server openssh-client clang-19 libclang-rt-19-dev llvm-19
	dnsmasq-base chromium tmux libnss-myhostname gdb busybox-static
	python3-ipykernel python3-jupyter-client python3-matplotlib python3-pandas) # llvm-19: its llvm-symbolizer names the functions in a sanitizer's reports;
	# dnsmasq: vm.egress's upstream resolver, inside a network namespace of the test's;
	# chromium: the browser tests; tmux: the real terminal server.pty and vm.pty drive `aas shell` in;
	# libnss-myhostname: scripts.quickstart resolves a preview's NAME.localhost as the quick start makes it;
	# busybox-static: unit.ssh's sshd gives its sessions busybox's grep and tr, as the tiny image has them;
	# gdb: a test's watchdog (tests/testutil.c) prints a hung test's threads before ctest's timeout kills it;
	# python3-ipykernel ... python3-pandas: code.server runs the guest's code server and its kernels here
# The benchmarks' load generator and helpers (bench/server-bench, bench/soak).
SAAS_BENCH_PACKAGES=(wrk jq curl iproute2)
# Running sandboxes and building guest images.
SAAS_VM_PACKAGES=(
	qemu-system-x86 qemu-utils libvirt-daemon libvirt-daemon-driver-qemu libvirt-clients
	openssh-client openssh-server openssh-sftp-server busybox-static cpio linux-image-amd64
	mmdebstrap e2fsprogs util-linux nftables iproute2
	curl debian-archive-keyring # the default image: Node.js from the npm registry, Debian 13's keys
	gnutls-bin # certtool: libvirt's TLS for VM hosts (the CA and certificates vm.hosts makes)
)

say() { printf '\033[1m==> %s\033[0m\n' "$*" >&2; }

# Install whatever of the given Debian packages is missing (apt, as root or via sudo).
ensure_packages() {
	local missing=() p
	for p in "$@"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	say "installing: ${missing[*]}"
	local sudo=()
	[ "$(id -u)" -eq 0 ] || sudo=(sudo)
	export DEBIAN_FRONTEND=noninteractive
	"${sudo[@]}" apt-get update -q >/dev/null
	"${sudo[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

jobs() { nproc 2>/dev/null || echo 2; }

# Preview URLs (http://NAME.localhost:8080/) for every client on this machine,
# not only browsers and curl: glibc does not resolve *.localhost by itself, so
# Python's urllib, Node's fetch and getent fail on them. systemd's
# nss-myhostname maps localhost and every name below it to loopback; it is
# added to the hosts line of /etc/nsswitch.conf, after "files", once. A real
# deployment uses wildcard DNS and TLS instead (docs/operations.md).
ensure_localhost_names() {
	local sudo=() changed
	[ "$(id -u)" -eq 0 ] || sudo=(sudo)
	ensure_packages libnss-myhostname
	changed=$(nsswitch_add_myhostname /etc/nsswitch.conf "${sudo[@]}")
	if [ -n "$changed" ]; then
		say "added myhostname to /etc/nsswitch.conf's hosts line: *.localhost resolves to this machine for every program"
	fi
}

# nsswitch_add_myhostname FILE [PREFIX...]: the edit ensure_localhost_names makes,
# on any nsswitch.conf (tests/scripts/quickstart.sh makes it on a copy): myhostname
# after "files" on the hosts line, once. The sed runs under PREFIX (sudo). Prints
# "added" when it changed FILE, nothing when myhostname was there; fails, saying
# why, when FILE has no hosts line with "files" to put it after.
nsswitch_add_myhostname() {
	local file=$1 has='^hosts:.*[[:space:]]myhostname([[:space:]]|$)'
	shift
	grep -Eq "$has" "$file" 2>/dev/null && return 0
	if ! grep -Eq '^hosts:.*[[:space:]]files([[:space:]]|$)' "$file" 2>/dev/null; then
		echo "$file has no \"hosts:\" line with \"files\": add myhostname to it by hand (man nss-myhostname)" >&2
		return 1
	fi
	"$@" sed -i -E '/^hosts:/ s/([[:space:]]files)([[:space:]]|$)/\1 myhostname\2/' "$file"
	grep -Eq "$has" "$file" && echo added
}

# The accounts sandboxes need. libvirt's QEMU driver looks up the libvirt-qemu
# user and group when it starts, even when its qemu.conf names another; Debian
# creates them only with libvirt-daemon-system (which would also start a daemon
# we do not use). QEMU runs under the aas-guest group, which the driver's
# nftables guard keeps away from the host's own services (docs/sandboxes.md).
# As root, each VM's QEMU runs under a uid of its own (docs/security.md);
# libvirt's own probes of QEMU run as aas-qemu, which must open /dev/kvm (a
# probe that cannot is redone at every VM start, about a minute each).
ensure_vm_accounts() {
	local sudo=()
	[ "$(id -u)" -eq 0 ] || sudo=(sudo)
	getent group libvirt-qemu >/dev/null || "${sudo[@]}" groupadd --system libvirt-qemu
	getent passwd libvirt-qemu >/dev/null ||
		"${sudo[@]}" useradd --system --no-create-home --home-dir /var/lib/libvirt -g libvirt-qemu \
			-s /usr/sbin/nologin libvirt-qemu
	# In the kvm group where there is one, as Debian's libvirt-daemon-system makes it: the test VM hosts'
	# libvirtds run QEMU as libvirt-qemu, and where /dev/kvm is there but that user cannot open it,
	# libvirt 9.0 finds its QEMU capabilities stale at every domain start and probes QEMU again
	# (~50 s a start on a 2-core machine with such a device; docs/operations.md).
	if getent group kvm >/dev/null && ! id -nG libvirt-qemu | grep -qw kvm; then
		"${sudo[@]}" usermod -a -G kvm libvirt-qemu
	fi
	getent group aas-guest >/dev/null || "${sudo[@]}" groupadd --system aas-guest
	local groups=aas-guest
	getent group kvm >/dev/null && groups=aas-guest,kvm
	if getent passwd aas-qemu >/dev/null; then
		"${sudo[@]}" usermod -a -G "$groups" aas-qemu
	else
		"${sudo[@]}" useradd --system --no-create-home --home-dir /nonexistent -g aas-guest -G "$groups" \
			-s /usr/sbin/nologin aas-qemu
	fi
	# vm.system's engine: an unprivileged account of its own, the one group of
	# the test's libvirtd socket (standing for the libvirt group).
	getent passwd aas-test >/dev/null ||
		"${sudo[@]}" useradd --system --user-group --no-create-home --home-dir /nonexistent \
			-s /usr/sbin/nologin aas-test
}

# Node.js and npm for the MCP client tests. A machine may carry its own Node.js
# (not Debian's, whose npm package would then conflict): any working node and
# npm will do; only without them are Debian's installed.
ensure_node() {
	command -v node >/dev/null && command -v npm >/dev/null && return 0
	ensure_packages nodejs npm
}

# The API viewer of /docs/api (Swagger UI) and the dashboard's terminal
# (xterm.js and its fit addon), pinned by server/viewer's package files,
# installed with npm into DIR, which aas-server serves read-only
# (--docs-viewer DIR; its default for a build tree or an install is
# <bindir>/../share/libsaas/api-viewer). Quiet when it is there already.
install_api_viewer() {
	local dir=$1 src
	src=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../server/viewer" && pwd)
	mkdir -p "$dir"
	cmp -s "$src/package-lock.json" "$dir/node_modules/.package-lock.json.installed" 2>/dev/null && return 0
	say "installing the API viewer into $dir"
	cp "$src/package.json" "$src/package-lock.json" "$dir/"
	(cd "$dir" && npm ci --omit=dev --no-audit --no-fund --loglevel=error)
	cp "$src/package-lock.json" "$dir/node_modules/.package-lock.json.installed"
}
