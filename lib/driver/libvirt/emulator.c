/*
 * The embedded driver's QEMU as its domains name it: a link in the root
 * whose libvirt capabilities make libvirt read a started guest's CPU by its
 * feature words, not property by property (emulator.h says why and how).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "driver/libvirt/emulator.h"
#include "util/error.h"
#include "util/file.h"
#include "util/util.h"

/* The flags taken out: the first selects the read per property, libvirt sets the second from it. */
static const char *const cpu_flags[] = { "cpu-unavailable-features", "canonical-cpu-features" };

/* Where libvirt keeps the entries, under the root (its cacheDir, "capabilities"). */
#define CAPS_DIR "cache/qemu/capabilities"
#define ALIAS_DIR "bin"

/* A path libvirt writes into its XML as it is: absolute, and nothing XML would escape. */
static bool plain_path(const char *p)
{
	size_t n = strlen(p);

	return n > 1 && n < PATH_MAX && p[0] == '/' && !strpbrk(p, "&<>'\"\n\r\t");
}

/* The one occurrence of needle in text[0..len), or NULL when there is none or more than one. */
static const char *find_once(const char *text, size_t len, const char *needle)
{
	const char *at = memmem(text, len, needle, strlen(needle)), *next;

	if (!at)
		return NULL;
	next = memmem(at + 1, len - (size_t)(at + 1 - text), needle, strlen(needle));
	return next ? NULL : at;
}

/*
 * The flag's whole line in text[0..len): [*from, *to), the indent and the
 * newline included. 1 when it is there once, 0 when not, -1 when more often.
 */
static int flag_line(const char *text, size_t len, const char *flag, size_t *from, size_t *to)
{
	char needle[96];
	const char *at;
	size_t a, z;

	snprintf(needle, sizeof(needle), "<flag name='%s'/>", flag);
	if (!(at = find_once(text, len, needle)))
		return memmem(text, len, needle, strlen(needle)) ? -1 : 0;
	a = (size_t)(at - text);
	z = a + strlen(needle);
	while (a > 0 && (text[a - 1] == ' ' || text[a - 1] == '\t'))
		a--;
	if (z < len && text[z] == '\n')
		z++;
	*from = a;
	*to = z;
	return 1;
}

int saas__lv_caps_for_alias(const char *text, size_t len, const char *binary, const char *alias, char **out,
                            size_t *out_len)
{
	saas__buf b = SAAS__BUF_INIT;
	char *emu = NULL;
	const char *at;
	size_t pos = 0, skip_from[2], skip_to[2], emu_at, emu_len;
	bool has[2];
	int rc = SAAS_OK;

	*out = NULL;
	*out_len = 0;
	if (!plain_path(binary) || !plain_path(alias))
		return saas__inval("an emulator path libvirt's XML would escape: '%s' or '%s'", binary, alias);
	if (memchr(text, '\0', len))
		return saas__inval("libvirt's capabilities of %s hold a NUL byte", binary);
	while (pos < len && strchr(" \t\r\n", text[pos]))
		pos++;
	if (len - pos < 10 || memcmp(text + pos, "<qemuCaps>", 10) != 0)
		return saas__inval("libvirt's capabilities of %s do not start with <qemuCaps>", binary);
	if (asprintf(&emu, "<emulator>%s</emulator>", binary) < 0)
		return saas__oom();
	emu_len = strlen(emu);
	at = find_once(text, len, emu);
	if (!at || !find_once(text, len, "<emulator>")) {
		rc = saas__inval("libvirt's capabilities of %s do not name it once as their emulator", binary);
		goto out;
	}
	emu_at = (size_t)(at - text);
	for (size_t i = 0; i < 2; i++) {
		int n = flag_line(text, len, cpu_flags[i], &skip_from[i], &skip_to[i]);
		if (n < 0) {
			rc = saas__inval("libvirt's capabilities of %s hold the flag %s more than once", binary, cpu_flags[i]);
			goto out;
		}
		has[i] = n > 0;
	}
	if (!has[0])
		goto out; /* libvirt reads this QEMU's CPU by the feature words already */
	/* Copy it in order, leaving out each flag's line and writing the alias for the emulator. */
	pos = 0;
	for (;;) {
		size_t next = len;
		int what = -1;

		if (emu_at >= pos && emu_at < next) {
			next = emu_at;
			what = 2;
		}
		for (int i = 0; i < 2; i++)
			if (has[i] && skip_from[i] >= pos && skip_from[i] < next) {
				next = skip_from[i];
				what = i;
			}
		if ((rc = saas__buf_put(&b, text + pos, next - pos)) < 0)
			goto out;
		if (what < 0)
			break;
		if (what == 2) {
			if ((rc = saas__buf_printf(&b, "<emulator>%s</emulator>", alias)) < 0)
				goto out;
			pos = emu_at + emu_len;
		} else {
			pos = skip_to[what];
		}
	}
	/* Lines taken out join what was around them: whatever that made, the result is checked as it is. */
	if (!b.len || memchr(b.data, '\0', b.len) || !find_once(b.data, b.len, "<emulator>") ||
	    !memmem(b.data, b.len, alias, strlen(alias)) || flag_line(b.data, b.len, cpu_flags[0], &pos, &pos) != 0 ||
	    flag_line(b.data, b.len, cpu_flags[1], &pos, &pos) != 0) {
		rc = saas__inval("libvirt's capabilities of %s are not lines the flags can be taken out of", binary);
		goto out;
	}
	*out = saas__buf_detach(&b, out_len);
	if (!*out)
		rc = saas__oom();
out:
	saas__buf_free(&b);
	free(emu);
	return rc;
}

/* The file name libvirt gives path's entry: its SHA-256 in hex, ".xml". */
static void entry_name(char out[70], const char *path)
{
	char hex[65];

	saas__sha256_hex(hex, path, strlen(path));
	snprintf(out, 70, "%s.xml", hex);
}

/* ROOT/bin/NAME, a link to binary: made, or remade when it is anything else. */
static int make_link(const char *root, const char *binary, char **alias)
{
	const char *base = strrchr(binary, '/') + 1;
	char *dir = NULL, *path = NULL, *tmp = NULL, target[PATH_MAX];
	ssize_t n;
	int rc = SAAS_OK;

	*alias = NULL;
	if (!(dir = saas__lv_path_join(root, ALIAS_DIR)) || !(path = saas__lv_path_join(dir, base))) {
		rc = SAAS_ENOMEM;
		goto out;
	}
	/* 0755: QEMU's own uid resolves the path as libvirt starts it there. */
	if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot create %s: %s", dir, strerror(errno));
		goto out;
	}
	n = readlink(path, target, sizeof(target));
	if (n < 0 || (size_t)n != strlen(binary) || memcmp(target, binary, (size_t)n) != 0) {
		if (asprintf(&tmp, "%s/.%s.%ld", dir, base, (long)getpid()) < 0) {
			tmp = NULL;
			rc = saas__oom();
			goto out;
		}
		(void)unlink(tmp);
		if (symlink(binary, tmp) < 0 || rename(tmp, path) < 0) {
			rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot link %s to %s: %s", path, binary, strerror(errno));
			(void)unlink(tmp);
			goto out;
		}
	}
	*alias = path;
	path = NULL;
out:
	free(dir);
	free(path);
	free(tmp);
	return rc;
}

int saas__lv_emulator_alias(const char *root, const char *binary, char **alias)
{
	char *caps_dir = NULL, *link = NULL, *text = NULL, *entry = NULL, name[70];
	size_t len = 0, entry_len = 0;
	int dirfd = -1, rc;

	*alias = NULL;
	if (!plain_path(binary) || !strrchr(binary, '/')[1])
		return saas__inval("libvirt's QEMU '%s' is not a plain absolute path", binary);
	if (!(caps_dir = saas__lv_path_join(root, CAPS_DIR)))
		return SAAS_ENOMEM;
	if ((dirfd = open(caps_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
		rc = saas__error(SAAS_EIO, SAAS_ERRCLASS_OS, errno, "cannot open %s: %s", caps_dir, strerror(errno));
		goto out;
	}
	entry_name(name, binary);
	/* libvirt's own entry, in the root: never read through a link (nor a FIFO) put there. */
	if ((rc = saas__file_read(&text, &len, dirfd, name, EMULATOR_CAPS_MAX, SAAS__FILE_NOFOLLOW)) < 0) {
		rc = saas__error_wrap(rc, "libvirt's capabilities of %s", binary);
		goto out;
	}
	/* The link's path first: the entry names it. */
	if ((rc = make_link(root, binary, &link)) < 0)
		goto out;
	if ((rc = saas__lv_caps_for_alias(text, len, binary, link, &entry, &entry_len)) < 0 || !entry)
		goto out;
	entry_name(name, link);
	/* libvirt reads the entry whole or finds none: never half of one. */
	if ((rc = saas__file_write_atomic(dirfd, name, entry, entry_len, 0600, 0)) < 0)
		goto out;
	*alias = link;
	link = NULL;
out:
	if (dirfd >= 0)
		close(dirfd);
	free(caps_dir);
	free(link);
	free(text);
	free(entry);
	return rc;
}

/* The domain capabilities' <path>: the QEMU libvirt starts for a guest of this arch and type. */
static char *caps_path(const char *xml)
{
	const char *a = xml ? strstr(xml, "<path>") : NULL, *z = a ? strstr(a, "</path>") : NULL;
	char *p;

	if (!z)
		return NULL;
	a += 6;
	if (!(p = strndup(a, (size_t)(z - a))))
		saas__oom();
	return p;
}

void saas__lv_emulator_setup(struct drv *d, const char *xml)
{
	char *binary = NULL, *alias = NULL;
	int rc;

	if (!d->root || !d->cpu_words)
		return;
	if (!xml) {
		rc = saas__lv_virt_error("asking libvirt for its QEMU");
	} else if (!(binary = caps_path(xml))) {
		rc = saas__error(SAAS_EBACKEND, SAAS_ERRCLASS_DRIVER, 0, "libvirt's domain capabilities name no QEMU");
	} else {
		rc = saas__lv_emulator_alias(d->root, binary, &alias);
	}
	if (rc < 0)
		saas__lv_log(d, SAAS_LOG_WARN, "libvirt reads each started guest's CPU property by property (~400 monitor "
		             "commands a start): %s", saas_error_last()->message);
	else if (!alias)
		saas__lv_log(d, SAAS_LOG_INFO, "libvirt reads %s's guest CPUs by their feature words already", binary);
	else
		saas__lv_log(d, SAAS_LOG_INFO, "domains name %s (%s), whose guest CPUs libvirt reads by their feature words",
		             alias, binary);
	d->emulator = alias;
	free(binary);
}
