/*
 * An execution's dashboard page, kept up to date while its command runs:
 * every 2 s, while the page is visible, the page is fetched again (with the
 * session's cookie) and its #execution-live (the facts and the output so far)
 * takes the place of this one's, until the command has ended. Without this
 * script the page has a link that reloads it.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
"use strict";

(function () {
	var live = document.getElementById("execution-live");
	var say = document.getElementById("execution-follow");
	var busy = false, timer = null, failures = 0;

	function running(root) {
		var dl = root.querySelector("#execution");
		return !!dl && dl.getAttribute("data-status") === "running";
	}

	function stop(text) {
		clearInterval(timer);
		say.textContent = text;
	}

	function refresh() {
		if (document.hidden || busy)
			return;
		busy = true;
		fetch(location.pathname, { credentials: "same-origin", cache: "no-store" }).then(function (r) {
			return r.ok ? r.text() : null;
		}).then(function (html) {
			var next;
			busy = false;
			next = html === null ? null : new DOMParser().parseFromString(html, "text/html").getElementById("execution-live");
			if (!next) {
				/* A session that ended, a sandbox gone: the reload link says what. */
				if (++failures >= 3)
					stop("This page could not follow the command: reload it.");
				return;
			}
			failures = 0;
			live.replaceChildren.apply(live, Array.prototype.slice.call(next.childNodes));
			live.setAttribute("data-refreshed", String(Date.now()));
			if (!running(live))
				stop("The command has ended; this is its final output.");
		}, function () {
			busy = false;
			if (++failures >= 3)
				stop("This page could not follow the command: reload it.");
		});
	}

	if (!live || !say || !running(live))
		return;
	say.textContent = "Following the command: this page updates every 2 s while it runs.";
	timer = setInterval(refresh, 2000);
})();
