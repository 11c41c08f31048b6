/*
 * The dashboard's little script, served from this server (no inline script:
 * the pages' Content-Security-Policy forbids it). The pages work without it;
 * it only adds:
 *   - live countdowns: <time data-expires="MS"> (milliseconds since the epoch)
 *     reads "in 4 min 12 s", then "expired";
 *   - copy buttons: <button data-copy="ID"> copies the text of element ID.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
"use strict";

(function () {
	function span(ms) {
		var s = Math.max(0, Math.floor(ms / 1000));
		if (s >= 86400)
			return Math.floor(s / 86400) + " d " + Math.floor((s % 86400) / 3600) + " h";
		if (s >= 3600)
			return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
		if (s >= 60)
			return Math.floor(s / 60) + " min " + (s % 60) + " s";
		return s + " s";
	}

	function tick() {
		var now = Date.now();
		document.querySelectorAll("time[data-expires]").forEach(function (t) {
			var left = Number(t.getAttribute("data-expires")) - now;
			t.textContent = left > 0 ? "in " + span(left) : "expired";
		});
	}

	function copy(button) {
		var target = document.getElementById(button.getAttribute("data-copy"));
		if (!target || !navigator.clipboard)
			return;
		navigator.clipboard.writeText(target.textContent.trim()).then(function () {
			button.textContent = "Copied";
		}, function () {
			button.textContent = "Select and copy the key by hand";
		});
	}

	document.addEventListener("DOMContentLoaded", function () {
		document.querySelectorAll("button[data-copy]").forEach(function (b) {
			b.addEventListener("click", function () { copy(b); });
		});
		if (document.querySelector("time[data-expires]")) {
			tick();
			setInterval(tick, 1000);
		}
	});
})();
