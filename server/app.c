/*
 * Serving: open the engine, listen, wait for SIGINT/SIGTERM, then stop
 * accepting, let requests in flight finish (briefly) and free the engine.
 * Sandboxes keep running; the next start reconciles them.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "front.h"
#include "app.h"
#include "admin/admin.h"
#include "api/api.h"
#include "e2b/e2b.h"
#include "mcp/mcp_http.h"
#include "preview/preview.h"
#include "web/web.h"

static void write_port_file(const char *path, unsigned int port)
{
	char tmp[4096];
	FILE *f;

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	if (!(f = fopen(tmp, "w"))) {
		aas_log(SAAS_LOG_WARN, "cannot write %s", tmp);
		return;
	}
	fprintf(f, "%u\n", port);
	fclose(f);
	rename(tmp, path);
}

static int open_engine(saas_engine **engine, const struct aas_config *cfg, const struct saas_driver *driver,
                       unsigned int port)
{
	saas_engine_options o = SAAS_ENGINE_OPTIONS_INIT;
	char *driver_config = aas_config_driver_string(cfg), *preview = NULL;
	int rc;

	if (cfg->preview_url)
		preview = strdup(cfg->preview_url);
	else if (port == 80)
		rc = asprintf(&preview, "http://{name}.%s/", cfg->preview_domain);
	else
		rc = asprintf(&preview, "http://{name}.%s:%u/", cfg->preview_domain, port);
	(void)rc;
	o.state_dir = cfg->state_dir;
	o.store_url = cfg->store_url;
	o.driver = driver;
	o.driver_config = driver_config;
	o.default_image = cfg->image;
	o.preview_url = preview;
	o.pool = cfg->pool;
	o.max_sandboxes = cfg->max_sandboxes;
	o.max_executions = cfg->max_executions;
	o.max_transfers = cfg->max_transfers;
	o.creates_per_minute = cfg->creates_per_minute;
	o.requests_per_second = cfg->requests_per_second;
	o.execution_retention_s = cfg->retention_s;
	o.min_free_mb = cfg->min_free_mb;
	o.disk_budget_gb = cfg->disk_budget_gb;
	o.lease_ttl_ms = cfg->lease_ttl_s * 1000;
	o.host_heartbeat_ms = cfg->host_heartbeat_s * 1000;
	o.metrics_interval_ms = cfg->metrics_interval_ms;
	o.metrics_window_s = cfg->metrics_window_s;
	o.host_grace_ms = cfg->host_grace_s * 1000;
	o.mcp_sessions_max = cfg->mcp_sessions;
	o.paused_usd_micro_per_gib_hour = cfg->paused_price;
	/* Sizes, prices and credit are the library's defaults; /v1/service reads them back. */
	o.log = aas_engine_log;
	o.log_level = cfg->log_level;
	rc = saas_engine_open(engine, &o);
	if (rc < 0)
		aas_log(SAAS_LOG_ERROR, "cannot open the engine: %s (%s)", saas_error_last()->message, saas_strerror(rc));
	free(driver_config);
	free(preview);
	return rc;
}

static void wait_for_signal(const sigset_t *set)
{
	int sig = 0;

	while (sigwait(set, &sig) != 0)
		;
	aas_log(SAAS_LOG_INFO, "%s: stopping (no new connections; requests in flight may finish)",
	        sig == SIGINT ? "SIGINT" : "SIGTERM");
}

static bool drain(unsigned int grace_s)
{
	struct timespec ts = { 0, 50 * 1000 * 1000 };
	int64_t until = aas_now_ms() + (int64_t)grace_s * 1000;

	while (aas_http_inflight() > 0 && aas_now_ms() < until)
		nanosleep(&ts, NULL);
	return aas_http_inflight() == 0;
}

static void print_routes(void)
{
	/* The API's routes, which openapi.json documents; the pages for people are not the API. */
	for (size_t i = 0; i < aas_nroutes; i++)
		if (!(aas_routes[i].flags & AAS_R_PAGE))
			printf("%s %s\n", aas_routes[i].method, aas_routes[i].pattern);
}

int aas_start(const struct aas_config *cfg, const struct saas_driver *driver, saas_engine **engine,
              unsigned int *port)
{
	int listen_fd;

	*engine = NULL;
	if ((listen_fd = aas_http_bind(cfg, port)) < 0)
		return -1;
	if (open_engine(engine, cfg, driver, *port) < 0)
		goto fail;
	aas_auth_init(*engine, cfg->key_ttl_s);
	if (aas_preview_init(*engine, cfg) < 0)
		goto fail;
	aas_pty_init(cfg);
	aas_metrics_init(*engine);
	aas_metrics_host_heartbeat(cfg->host_heartbeat_s ? cfg->host_heartbeat_s * 1000 : SAAS_ENGINE_HOST_HEARTBEAT_MS);
	if (aas_service_set(cfg, *port, *engine) < 0 || aas_pages_init(cfg) < 0)
		goto fail;
	aas_mcp_http_init(*engine, cfg, *port);
	if (aas_people_init(*engine, cfg) < 0 || aas_e2b_init(*engine, cfg) < 0)
		goto fail;
	if (aas_http_start(cfg, listen_fd) < 0)
		goto fail;
	return 0;
fail:
	close(listen_fd);
	return -1;
}

void aas_stop(saas_engine *engine)
{
	aas_http_stop();
	aas_preview_shutdown();
	aas_auth_shutdown();
	aas_service_free();
	aas_pages_free();
	aas_mcp_http_free();
	aas_e2b_shutdown();
	saas_engine_free(engine);
}

int aas_main(int argc, char **argv, const struct saas_driver *driver)
{
	struct aas_config cfg;
	saas_engine *engine = NULL;
	unsigned int port = 0;
	sigset_t set;
	int rc, status = 1;

	if (argc > 1 && (strcmp(argv[1], "account") == 0 || strcmp(argv[1], "key") == 0 ||
	                 strcmp(argv[1], "user") == 0 || strcmp(argv[1], "invite") == 0 || strcmp(argv[1], "host") == 0))
		return aas_admin_main(argc, argv);
	if (argc > 1 && strcmp(argv[1], "e2b-key") == 0)
		return aas_e2b_key_main(argc, argv);
	if (argc > 1 && strcmp(argv[1], "routes") == 0) {
		print_routes();
		return 0;
	}
	if ((rc = aas_config_parse(&cfg, argc, argv)) != 0) {
		aas_config_free(&cfg);
		return rc > 0 ? 0 : 2;
	}
	aas_log_set_level(cfg.log_level);
	if (cfg.store_url_argv && aas_store_url_has_password(cfg.store_url))
		aas_log(SAAS_LOG_WARN, "%s", AAS_STORE_PASSWORD_WARNING);
	/* Signals go to sigwait() here, never to the connection threads. */
	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	if (aas_start(&cfg, driver, &engine, &port) < 0)
		goto out;
	aas_log(SAAS_LOG_INFO, "aas-server %s listening on %s%s%s:%u (previews: *.%s)", saas_version(),
	        strchr(cfg.listen_host, ':') ? "[" : "", cfg.listen_host, strchr(cfg.listen_host, ':') ? "]" : "",
	        port, cfg.preview_domain);
	if (cfg.port_file)
		write_port_file(cfg.port_file, port);
	wait_for_signal(&set);
	/*
	 * The engine's own work (a template being built) is abandoned now and
	 * its VM destroyed: requests in flight may take the whole grace, and a
	 * server that then exits without them must leave no VM of its own.
	 */
	if (saas_engine_stop(engine, 0) < 0)
		aas_log(SAAS_LOG_WARN, "stopping the engine's own work: %s", saas_error_last()->message);
	aas_http_quiesce();
	aas_pty_shutdown();
	if (!drain(cfg.grace_s)) {
		/* A long exec is still running: leave it; the sandbox stays, its execution is marked failed at the next start. */
		aas_log(SAAS_LOG_WARN, "%u requests still in flight after %us; exiting without them", aas_http_inflight(),
		        cfg.grace_s);
		fflush(stderr);
		_exit(0);
	}
	status = 0;
out:
	aas_stop(engine);
	if (status == 0)
		aas_log(SAAS_LOG_INFO, "stopped");
	aas_config_free(&cfg);
	return status;
}
