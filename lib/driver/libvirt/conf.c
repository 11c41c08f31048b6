/*
 * The libvirt driver's configuration: driver_config, the engine's SSH key
 * pair, and the embedded libvirt's root and qemu.conf.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver/libvirt/conf.h"
#include "driver/libvirt/guard.h"
#include "driver/libvirt/libvirt_driver.h"
#include "driver/libvirt/memfile.h"
#include "util/file.h"
#include "util/spawn.h"

char *saas__lv_default_images_dir(void)
{
	const char *env = getenv("AAS_IMAGE_DIR"), *cache = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	char *p = NULL;

	if (env && *env)
		return saas__strdup(env);
	if (cache && *cache) {
		if (asprintf(&p, "%s/aas/images", cache) < 0)
			p = NULL;
	} else if (home && *home) {
		if (asprintf(&p, "%s/.cache/aas/images", home) < 0)
			p = NULL;
	} else {
		p = strdup("/var/cache/aas/images");
	}
	if (!p)
		saas__oom();
	return p;
}

/* One of three words, as the index of an enum listed in the same order. */
static int parse_choice(const char *key, const char *val, const char *const names[3], int *out)
{
	for (int i = 0; i < 3; i++)
		if (strcmp(val, names[i]) == 0) {
			*out = i;
			return SAAS_OK;
		}
	return saas__inval("%s must be %s, %s or %s, not '%s'", key, names[0], names[1], names[2], val);
}

/* A switch: on or off. */
static int parse_onoff(const char *key, const char *val, bool *out)
{
	if (strcmp(val, "on") != 0 && strcmp(val, "off") != 0)
		return saas__inval("%s must be on or off, not '%s'", key, val);
	*out = strcmp(val, "on") == 0;
	return SAAS_OK;
}

/* A count from 0 to max; what says what it counts in the error ("MiB", or "" for a plain number). */
static int parse_count(const char *key, const char *val, unsigned int max, const char *what, unsigned int *out)
{
	unsigned long v;
	char *end;

	errno = 0;
	v = strtoul(val, &end, 10);
	if (!*val || *end || errno || val[0] < '0' || val[0] > '9' || v > max)
		return saas__inval("%s must be 0 to %u%s%s, not '%s'", key, max, *what ? " " : "", what, val);
	*out = (unsigned int)v;
	return SAAS_OK;
}

/* KEY=SECONDS, 1 to max: in ms into *ms. */
static int parse_seconds(const char *key, const char *val, int max, int *ms)
{
	char *end;
	long v = strtol(val, &end, 10);

	if (*end || v <= 0 || v > max)
		return saas__inval("%s must be 1 to %d seconds", key, max);
	*ms = (int)v * 1000;
	return SAAS_OK;
}

/* uids=auto|off|FIRST-LAST: a range of at most UIDS_COUNT_MAX uids, clear of the host's own users. */
static int parse_uids(struct saas__lv_config *cfg, const char *val)
{
	unsigned long first, last;
	char *end;

	if (strcmp(val, "auto") == 0 || strcmp(val, "off") == 0) {
		cfg->uids = strcmp(val, "auto") == 0 ? UIDS_AUTO : UIDS_OFF;
		return SAAS_OK;
	}
	/* strtoul takes signs and spaces: each bound must start with a digit. */
	errno = 0;
	if (!isdigit((unsigned char)val[0]))
		goto bad;
	first = strtoul(val, &end, 10);
	if (*end != '-' || !isdigit((unsigned char)end[1]))
		goto bad;
	last = strtoul(end + 1, &end, 10);
	if (*end || errno)
		goto bad;
	if (first < UIDS_FIRST_MIN || last > UIDS_LAST_MAX || last < first || last - first >= UIDS_COUNT_MAX)
		return saas__inval("uids must be a range of 1 to %u uids from %u to %u, not '%s'", UIDS_COUNT_MAX,
		                   UIDS_FIRST_MIN, UIDS_LAST_MAX, val);
	cfg->uids = UIDS_ON;
	cfg->uid_first = (unsigned int)first;
	cfg->uid_count = (unsigned int)(last - first + 1);
	return SAAS_OK;
bad:
	return saas__inval("uids must be auto, off or FIRST-LAST (e.g. %u-%u), not '%s'", UIDS_FIRST_DEFAULT,
	                   UIDS_FIRST_DEFAULT + UIDS_COUNT_DEFAULT - 1, val);
}

/*
 * cpu_limit=on|off|RATIO: RATIO host CPUs per vCPU, a decimal of at most
 * three places (no strtod: its idea of the decimal point is the locale's).
 */
static int parse_cpu_limit(struct saas__lv_config *cfg, const char *val)
{
	unsigned long milli = 0;
	const char *p = val;
	int places = -1;

	if (strcmp(val, "on") == 0 || strcmp(val, "off") == 0) {
		cfg->cpu_milli = strcmp(val, "on") == 0 ? CPU_MILLI_DEFAULT : 0;
		return SAAS_OK;
	}
	/* At most 5 integer digits: the bound check below sees every value that fits. */
	for (int digits = 0; isdigit((unsigned char)*p) && digits < 5; p++, digits++)
		milli = milli * 10 + (unsigned long)(*p - '0');
	if (p == val)
		goto bad;
	milli *= 1000;
	if (*p == '.') {
		unsigned long scale = 100;
		for (p++, places = 0; isdigit((unsigned char)*p) && places < 3; p++, places++, scale /= 10)
			milli += (unsigned long)(*p - '0') * scale;
		if (places == 0)
			goto bad;
	}
	if (*p)
		goto bad;
	if (milli < CPU_MILLI_MIN || milli > CPU_MILLI_MAX)
		return saas__inval("cpu_limit must be a ratio of host CPUs per vCPU from %u.%02u to %u, not '%s'",
		                   CPU_MILLI_MIN / 1000, CPU_MILLI_MIN % 1000 / 10, CPU_MILLI_MAX / 1000, val);
	cfg->cpu_milli = (unsigned int)milli;
	return SAAS_OK;
bad:
	return saas__inval("cpu_limit must be on, off or a ratio of host CPUs per vCPU (e.g. 0.5), not '%s'", val);
}

void saas__lv_config_clear(struct saas__lv_config *cfg)
{
	free(cfg->uri);
	free(cfg->images);
	free(cfg->dns_upstream);
	free(cfg->nft_helper);
	free(cfg->listen);
	free(cfg->owner);
	free(cfg->ssh_key);
	free(cfg->pool);
	free(cfg->pool_dir);
	cfg->uri = cfg->images = cfg->dns_upstream = cfg->nft_helper = NULL;
	cfg->listen = cfg->owner = cfg->ssh_key = cfg->pool = cfg->pool_dir = NULL;
}

/* A name that goes into domain metadata and volume names as it is: 1 to max of [A-Za-z0-9._-]. */
static bool plain_name(const char *s, size_t max)
{
	size_t n = strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-");

	return n > 0 && n <= max && !s[n] && s[0] != '.' && s[0] != '-';
}

/* key=VALUE for a string option, checked by ok (NULL: anything) which says what it must be. */
static int set_string(char **dst, const char *key, const char *val, bool ok, const char *must)
{
	if (!ok)
		return saas__inval("%s must be %s, not '%s'", key, must, val);
	free(*dst);
	return (*dst = saas__strdup(val)) ? SAAS_OK : SAAS_ENOMEM;
}

int saas__lv_config_parse(struct saas__lv_config *cfg, const char *text)
{
	char *copy, *save = NULL, *tok;
	int rc = SAAS_OK;

	memset(cfg, 0, sizeof(*cfg));
	cfg->accel = ACCEL_AUTO;
	cfg->network = NET_AUTO;
	cfg->boot_timeout_ms = DEFAULT_BOOT_TIMEOUT_MS;
	cfg->disk_sweep_grace_ms = DISK_SWEEP_GRACE_S * 1000;
	cfg->templates = true;
	cfg->control_port = true;
	cfg->control_files = true;
	cfg->control_exec = true;
	cfg->spare_warm = true;
	cfg->cpu_words = true;
	cfg->uids = UIDS_AUTO;
	cfg->uid_first = UIDS_FIRST_DEFAULT;
	cfg->uid_count = UIDS_COUNT_DEFAULT;
	cfg->cpu_milli = CPU_MILLI_DEFAULT;
	cfg->min_free_memory_mb = MIN_FREE_MEMORY_MB_DEFAULT;
	cfg->spares_auto = true;
	cfg->spare_idle_ms = SPARE_IDLE_S_DEFAULT * 1000;
	cfg->spare_idle_count = SPARE_IDLE_COUNT_DEFAULT;
	if (!text || !*text)
		return SAAS_OK;
	if (!strchr(text, '='))
		return (cfg->uri = saas__strdup(text)) ? SAAS_OK : SAAS_ENOMEM;
	if (!(copy = saas__strdup(text)))
		return SAAS_ENOMEM;
	for (tok = strtok_r(copy, " ,", &save); tok && rc == SAAS_OK; tok = strtok_r(NULL, " ,", &save)) {
		char *eq = strchr(tok, '='), *val, *scheme = strstr(tok, "://");
		/*
		 * A bare URI among options is uri=: an engine's driver_config that is
		 * a URI, with a VM host's " uri=... listen=..." appended (or a URI
		 * whose query holds an '=').
		 */
		if (scheme && (!eq || eq > scheme)) {
			free(cfg->uri);
			rc = (cfg->uri = saas__strdup(tok)) ? SAAS_OK : SAAS_ENOMEM;
			continue;
		}
		if (!eq) {
			rc = saas__inval("libvirt driver option '%s' is not key=value", tok);
			break;
		}
		*eq = '\0';
		val = eq + 1;
		if (strcmp(tok, "uri") == 0) {
			free(cfg->uri);
			rc = (cfg->uri = saas__strdup(val)) ? SAAS_OK : SAAS_ENOMEM;
		} else if (strcmp(tok, "images") == 0) {
			free(cfg->images);
			rc = (cfg->images = saas__strdup(val)) ? SAAS_OK : SAAS_ENOMEM;
		} else if (strcmp(tok, "accel") == 0) {
			static const char *const accels[] = { [ACCEL_AUTO] = "auto", [ACCEL_KVM] = "kvm", [ACCEL_TCG] = "tcg" };
			rc = parse_choice("accel", val, accels, &cfg->accel);
		} else if (strcmp(tok, "network") == 0) {
			static const char *const networks[] = { [NET_AUTO] = "auto", [NET_ISOLATED] = "isolated",
				                                  [NET_INTERNET] = "internet" };
			rc = parse_choice("network", val, networks, &cfg->network);
		} else if (strcmp(tok, "templates") == 0) {
			rc = parse_onoff(tok, val, &cfg->templates);
		} else if (strcmp(tok, "control_port") == 0) {
			rc = parse_onoff(tok, val, &cfg->control_port);
		} else if (strcmp(tok, "control_files") == 0) {
			rc = parse_onoff(tok, val, &cfg->control_files);
		} else if (strcmp(tok, "control_exec") == 0) {
			rc = parse_onoff(tok, val, &cfg->control_exec);
		} else if (strcmp(tok, "spare_warm") == 0) {
			rc = parse_onoff(tok, val, &cfg->spare_warm);
		} else if (strcmp(tok, "cpu_readback") == 0) {
			if (strcmp(val, "words") != 0 && strcmp(val, "properties") != 0)
				rc = saas__inval("cpu_readback must be words or properties, not '%s'", val);
			cfg->cpu_words = strcmp(val, "properties") != 0;
		} else if (strcmp(tok, "boot_timeout") == 0) {
			rc = parse_seconds(tok, val, BOOT_TIMEOUT_MAX_S, &cfg->boot_timeout_ms);
		} else if (strcmp(tok, "disk_sweep_grace") == 0) {
			rc = parse_seconds(tok, val, DISK_SWEEP_GRACE_MAX_S, &cfg->disk_sweep_grace_ms);
		} else if (strcmp(tok, "min_free_memory_mb") == 0) {
			rc = parse_count(tok, val, MIN_FREE_MEMORY_MB_MAX, "MiB", &cfg->min_free_memory_mb);
		} else if (strcmp(tok, "spares") == 0) {
			cfg->spares_auto = strcmp(val, "auto") == 0;
			if (!cfg->spares_auto && parse_count(tok, val, SPARES_MAX, "", &cfg->spares) < 0)
				rc = saas__inval("spares must be auto or 0 to %d, not '%s'", SPARES_MAX, val);
		} else if (strcmp(tok, "spare_idle") == 0) {
			cfg->spare_idle_ms = 0;
			if (strcmp(val, "off") != 0 && parse_seconds(tok, val, SPARE_IDLE_MAX_S, &cfg->spare_idle_ms) < 0)
				rc = saas__inval("spare_idle must be off or 1 to %d seconds, not '%s'", SPARE_IDLE_MAX_S, val);
		} else if (strcmp(tok, "spare_idle_count") == 0) {
			rc = parse_count(tok, val, SPARES_MAX, "", &cfg->spare_idle_count);
		} else if (strcmp(tok, "spare_memory_mb") == 0) {
			cfg->spare_memory_mb = 0;
			if (strcmp(val, "auto") != 0 &&
			    (parse_count(tok, val, SPARE_MEMORY_MB_MAX, "", &cfg->spare_memory_mb) < 0 || !cfg->spare_memory_mb))
				rc = saas__inval("spare_memory_mb must be auto or 1 to %d MiB (spares=0 starts none), not '%s'",
				                 SPARE_MEMORY_MB_MAX, val);
		} else if (strcmp(tok, "uids") == 0) {
			rc = parse_uids(cfg, val);
		} else if (strcmp(tok, "dns_upstream") == 0) {
			/* Checked when the resolver starts (egress.c), which says what it must look like. */
			free(cfg->dns_upstream);
			rc = (cfg->dns_upstream = saas__strdup(val)) ? SAAS_OK : SAAS_ENOMEM;
		} else if (strcmp(tok, "cpu_limit") == 0) {
			rc = parse_cpu_limit(cfg, val);
		} else if (strcmp(tok, "template_memory") == 0) {
			if (strcmp(val, "mapped") != 0 && strcmp(val, "loaded") != 0)
				rc = saas__inval("template_memory must be mapped or loaded, not '%s'", val);
			cfg->template_memory = strcmp(val, "loaded") == 0 ? TMPL_MEM_LOADED : TMPL_MEM_MAPPED;
		} else if (strcmp(tok, "nft_helper") == 0) {
			free(cfg->nft_helper);
			if (val[0] != '/')
				rc = saas__inval("nft_helper must be an absolute path, not '%s'", val);
			else
				rc = (cfg->nft_helper = saas__strdup(val)) ? SAAS_OK : SAAS_ENOMEM;
		} else if (strcmp(tok, "remote") == 0) {
			static const char *const remotes[] = { [REMOTE_AUTO] = "auto", [REMOTE_OFF] = "off", [REMOTE_ON] = "on" };
			rc = parse_choice("remote", val, remotes, &cfg->remote);
		} else if (strcmp(tok, "reap") == 0) {
			if (strcmp(val, "auto") != 0 && strcmp(val, "off") != 0)
				rc = saas__inval("reap must be auto or off, not '%s'", val);
			cfg->reap = strcmp(val, "off") == 0 ? REAP_OFF : REAP_AUTO;
		} else if (strcmp(tok, "listen") == 0) {
			/* QEMU's hostfwd takes an IPv4 address (and the engine connects to it). */
			struct in_addr a;
			rc = set_string(&cfg->listen, "listen", val, inet_pton(AF_INET, val, &a) == 1,
			                "the VM host's IPv4 address");
		} else if (strcmp(tok, "owner") == 0) {
			rc = set_string(&cfg->owner, "owner", val, plain_name(val, OWNER_MAX),
			                "1 to 64 letters, digits, '.', '_' or '-'");
		} else if (strcmp(tok, "ssh_key") == 0) {
			rc = set_string(&cfg->ssh_key, "ssh_key", val, val[0] == '/', "an absolute path");
		} else if (strcmp(tok, "pool") == 0) {
			rc = set_string(&cfg->pool, "pool", val, plain_name(val, OWNER_MAX),
			                "1 to 64 letters, digits, '.', '_' or '-'");
		} else if (strcmp(tok, "pool_dir") == 0) {
			/* It goes into the pool's XML as it is: no character that needs escaping. */
			rc = set_string(&cfg->pool_dir, "pool_dir", val, val[0] == '/' && !strpbrk(val, "<>&'\" \t"),
			                "an absolute path on the VM host");
		} else {
			rc = saas__inval("unknown libvirt driver option '%s'", tok);
		}
	}
	free(copy);
	if (rc < 0)
		saas__lv_config_clear(cfg);
	return rc;
}

/*
 * The engine's SSH key pair: made once per state directory, private part
 * 0600; or the cluster's (ssh_key=PATH, with PATH.pub), which every server
 * shares so that each reaches the guests another made. That one is the
 * operator's: never made, never changed here.
 */
int saas__lv_ensure_key(struct drv *d, const char *path)
{
	struct stat st;
	char *pubtext = NULL;
	size_t len;
	int rc;

	if (path) {
		if (!(d->key = saas__strdup(path)) || asprintf(&d->pub, "%s.pub", path) < 0) {
			d->pub = NULL;
			return saas__oom();
		}
		if (stat(d->pub, &st) < 0 || stat(d->key, &st) < 0)
			return saas__error(SAAS_EINVAL, SAAS_ERRCLASS_DRIVER, errno,
			                   "ssh_key=%s: the cluster's key pair needs both %s and %s.pub (ssh-keygen -t "
			                   "ed25519 -N '' -f %s)", path, path, path, path);
		/* A key others can read is every guest of the cluster theirs. */
		if (st.st_mode & 0077)
			return saas__error(SAAS_EINVAL, SAAS_ERRCLASS_DRIVER, 0,
			                   "ssh_key=%s is readable by others: chmod 600 it", path);
	} else if (!(d->key = saas__lv_path_join(d->dir, "id_ed25519")) ||
	           !(d->pub = saas__lv_path_join(d->dir, "id_ed25519.pub"))) {
		return SAAS_ENOMEM;
	}
	if (!path && (stat(d->key, &st) < 0 || stat(d->pub, &st) < 0)) {
		const char *argv[] = { "ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "aas-engine", "-f", d->key, NULL };
		unlink(d->key);
		unlink(d->pub);
		if ((rc = saas__run(argv, NULL)) < 0)
			return saas__error_wrap(SAAS_EBACKEND, "making the engine's SSH key");
		chmod(d->key, 0600);
	}
	/*
	 * The engine's own pair is read as made, never through a link put in
	 * its place; the operator's (ssh_key=) may be one (a mounted secret's
	 * files often are).
	 */
	if ((rc = saas__file_read(&pubtext, NULL, AT_FDCWD, d->pub, 4096, path ? 0 : SAAS__FILE_NOFOLLOW)) < 0)
		return saas__error_wrap(rc, "reading the SSH public key");
	len = strlen(pubtext);
	while (len && (pubtext[len - 1] == '\n' || pubtext[len - 1] == '\r'))
		pubtext[--len] = '\0';
	/* The guest reads its authorized key from the kernel command line, base64-encoded. */
	d->authkey_b64 = saas_base64_encode(pubtext, len);
	free(pubtext);
	return d->authkey_b64 ? SAAS_OK : saas__oom();
}

/*
 * The embedded driver's root. libvirt puts each VM's monitor socket under it,
 * and a UNIX socket path has at most 107 bytes, so the root cannot live in a
 * state directory of any length: it goes to a short runtime path named after
 * the state directory's hash (so two engines never share one), which lasts as
 * long as the VMs do (until reboot).
 */
int saas__lv_embed_root(const char *state_dir, char **out)
{
	const char *runtime = getenv("XDG_RUNTIME_DIR");
	char hash[65], *base = NULL;
	int rc = SAAS_OK;

	saas__sha256_hex(hash, state_dir, strlen(state_dir));
	hash[16] = '\0';
	if (geteuid() == 0)
		base = saas__strdup("/run/aas-libvirt");
	else if (runtime && *runtime && strlen(runtime) < 40)
		rc = asprintf(&base, "%s/aas-libvirt", runtime) < 0 ? saas__oom() : SAAS_OK;
	else
		rc = asprintf(&base, "/tmp/aas-libvirt-%u", (unsigned int)geteuid()) < 0 ? saas__oom() : SAAS_OK;
	if (rc < 0 || !base)
		return rc < 0 ? rc : SAAS_ENOMEM;
	if (saas__mkdir_p(base, 0700) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s: %s", base, strerror(errno));
	} else if (asprintf(out, "%s/%s", base, hash) < 0) {
		*out = NULL;
		rc = saas__oom();
	}
	free(base);
	return rc;
}

char *saas__lv_qemu_conf_text(bool euid_root, bool has_guest_group, bool confined)
{
	saas__buf b = SAAS__BUF_INIT;

	/*
	 * The embedded driver has no virtlogd: QEMU writes its own logs. QEMU runs
	 * as the engine's user (our files live in a 0700 state directory). As
	 * root, its group is GUEST_GROUP when that exists: the guard matches
	 * QEMU's sockets by it (the user stays root, which still opens our files).
	 *
	 * Confined, every domain carries its own uid in a static DAC label, which
	 * libvirt applies with no capabilities, no_new_privs and QEMU's seccomp
	 * sandbox (on by default). The user here runs only libvirt's capability
	 * probes: an unprivileged account in group kvm (a probe that cannot open
	 * /dev/kvm is redone at every start, about a minute each). Ownership is
	 * ours to set (uid.c), never libvirt's: with dynamic_ownership it would
	 * chown the shared image and template files to one VM's uid.
	 */
	saas__buf_puts(&b, "# Written by libsaas for its embedded libvirt driver.\n"
	                   "stdio_handler = \"file\"\n");
	if (euid_root && confined && has_guest_group)
		saas__buf_puts(&b, "user = \"" QEMU_USER "\"\ngroup = \"" GUEST_GROUP "\"\ndynamic_ownership = 0\n"
		                   "remember_owner = 0\nsecurity_driver = \"none\"\nseccomp_sandbox = 1\n");
	else if (euid_root)
		saas__buf_printf(&b,
		                 "user = \"root\"\ngroup = \"%s\"\ndynamic_ownership = 0\nremember_owner = 0\n"
		                 "security_driver = \"none\"\n",
		                 has_guest_group ? GUEST_GROUP : "root");
	return saas__buf_detach(&b, NULL);
}

int saas__lv_write_qemu_conf(const char *root, bool confined)
{
	/* The embedded driver reads ROOT/etc/qemu.conf (its domain configs live in ROOT/etc/qemu/). */
	char *dir = saas__lv_path_join(root, "etc"), *path = NULL, *text = NULL;
	FILE *f;
	int rc = SAAS_OK;

	if (!dir)
		return SAAS_ENOMEM;
	if (saas__mkdir_p(dir, 0700) < 0 || !(path = saas__lv_path_join(dir, "qemu.conf"))) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s", dir);
		goto out;
	}
	if (!(text = saas__lv_qemu_conf_text(geteuid() == 0, saas__lv_guest_gid(NULL), confined))) {
		rc = saas__oom();
		goto out;
	}
	if (!(f = fopen(path, "we"))) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot write %s: %s", path, strerror(errno));
		goto out;
	}
	fputs(text, f);
	if (fclose(f) != 0)
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot write %s: %s", path, strerror(errno));
out:
	free(dir);
	free(path);
	free(text);
	return rc;
}
