/*
 * The Use section of a sandbox's dashboard page, kept live: every few
 * seconds, while the page is visible, its body is fetched again (with the
 * session's cookie) from data-refresh, the server drawing the charts as it
 * drew them in the page. Without this script the page shows them as loaded.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
"use strict";

(function () {
	var live = document.getElementById("use-live");
	var busy = false;

	if (!live || !live.getAttribute("data-refresh"))
		return;
	function refresh() {
		if (document.hidden || busy)
			return;
		busy = true;
		fetch(live.getAttribute("data-refresh"), { credentials: "same-origin" }).then(function (r) {
			return r.ok ? r.text() : null;
		}).then(function (html) {
			var open = !!live.querySelector("details[open]"), d;
			busy = false;
			if (html === null)
				return;
			live.innerHTML = html;
			if (open && (d = live.querySelector("details")))
				d.open = true;
			live.setAttribute("data-refreshed", String(Date.now()));
		}, function () {
			busy = false;
		});
	}
	setInterval(refresh, 5000);
})();
