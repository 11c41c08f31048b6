/*
 * The dashboard's little script, served from this server (no inline script:
 * the pages' Content-Security-Policy forbids it). The pages work without it;
 * it only adds:
 *   - live countdowns: <time data-expires="MS"> (milliseconds since the epoch)
 *     reads "in 4 min 12 s", then "expired";
 *   - copy buttons: <button data-copy="ID"> copies the text of element ID;
 *   - confirmations in a dialog: <a data-confirm="QUESTION" data-post="PATH"
 *     data-csrf="TOKEN" [data-back] [data-confirm-verb]> opens a dialog whose
 *     form posts to PATH; without this script the link goes to the page that
 *     asks the same (GET of PATH), so nothing is destroyed unasked either way;
 *   - the spend chart's tooltip: the day and its spend over the pointer.
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

	// A field of the dialog's form.
	function hidden(form, name, value) {
		var i = document.createElement("input");
		i.type = "hidden";
		i.name = name;
		i.value = value;
		form.appendChild(i);
	}

	// Ask in a dialog before the link's action; every text goes in as text, never as markup.
	function confirmDialog(link) {
		var d = document.createElement("dialog"), h = document.createElement("h2"), p = document.createElement("p");
		var form = document.createElement("form"), buttons = document.createElement("div");
		var cancel = document.createElement("button"), go = document.createElement("button");
		var verb = link.getAttribute("data-confirm-verb") || link.textContent.trim();

		d.className = "confirm";
		d.setAttribute("aria-labelledby", "confirm-title");
		h.id = "confirm-title";
		h.textContent = verb + "?";
		p.textContent = link.getAttribute("data-confirm");
		form.method = "post";
		form.action = link.getAttribute("data-post");
		hidden(form, "csrf", link.getAttribute("data-csrf"));
		if (link.hasAttribute("data-back"))
			hidden(form, "back", link.getAttribute("data-back"));
		buttons.className = "buttons";
		cancel.type = "button";
		cancel.className = "secondary";
		cancel.textContent = "Cancel";
		cancel.addEventListener("click", function () { d.close(); });
		go.type = "submit";
		go.className = "danger";
		go.textContent = verb;
		buttons.append(cancel, go);
		form.appendChild(buttons);
		d.append(h, p, form);
		d.addEventListener("close", function () { d.remove(); link.focus(); });
		document.body.appendChild(d);
		d.showModal();
		cancel.focus();
	}

	// The chart's day under the pointer, its date and spend in a tooltip (the <title>s give the same, slower).
	function chartTips(figure) {
		var tip = document.createElement("div"), on = null;

		tip.className = "chart-tip";
		tip.hidden = true;
		tip.setAttribute("aria-hidden", "true");
		figure.appendChild(tip);
		figure.querySelectorAll("g.day").forEach(function (g) {
			var title = g.querySelector("title");

			g.setAttribute("data-tip", title ? title.textContent : "");
			if (title)
				title.remove();
			g.addEventListener("mouseenter", function () {
				var bar = g.querySelector("rect.bar").getBoundingClientRect();
				var box = figure.getBoundingClientRect();

				if (on)
					on.classList.remove("on");
				on = g;
				g.classList.add("on");
				tip.textContent = g.getAttribute("data-tip");
				tip.style.left = (bar.left + bar.width / 2 - box.left) + "px";
				tip.style.top = (Math.min(bar.top, bar.bottom - 2) - box.top) + "px";
				tip.hidden = false;
			});
			g.addEventListener("mouseleave", function () {
				g.classList.remove("on");
				tip.hidden = true;
			});
		});
	}

	document.addEventListener("DOMContentLoaded", function () {
		document.querySelectorAll("a[data-confirm]").forEach(function (a) {
			a.addEventListener("click", function (e) {
				if (typeof HTMLDialogElement !== "function")
					return; // the link's own page asks instead
				e.preventDefault();
				confirmDialog(a);
			});
		});
		document.querySelectorAll("figure.chart").forEach(chartTips);
		document.querySelectorAll("button[data-copy]").forEach(function (b) {
			b.addEventListener("click", function () { copy(b); });
		});
		if (document.querySelector("time[data-expires]")) {
			tick();
			setInterval(tick, 1000);
		}
	});
})();
