/*
 * The terminal of a sandbox's dashboard page: xterm.js 5 and its fit addon
 * (/static/viewer/xterm.js and addon-fit.js, npm's browser builds, which set
 * window.Terminal and window.FitAddon) over the terminal
 * WebSocket of the page's sandbox (docs/rest.md, "Terminal"): binary frames
 * carry the terminal's bytes both ways, text frames JSON (resize from here,
 * exit from the server). The session's cookie authenticates the handshake;
 * the page's CSRF token (data-csrf) goes in its URL, as no form carries it.
 *
 * The page's Content-Security-Policy is every page's: style-src 'self', no
 * inline style. xterm.js 5's DOM renderer breaks it twice, and adopt() below
 * mends both without widening the policy:
 *  - it writes its theme and cell sizes as the text of two <style> elements it
 *    makes while term.open() runs (DomRenderer: createElement("style"), then
 *    appendChild, textContent on each change, remove() when disposed); the
 *    policy blocks their text. While open() runs, a <style> it asks for is a
 *    comment node instead whose textContent fills a constructed style sheet
 *    the document adopts (document.adoptedStyleSheets), which the policy does
 *    not govern: same rules, same place in the cascade (after the page's own
 *    sheets, as the elements were).
 *  - it colours a cell of 24-bit colour (or one its minimum contrast
 *    adjusts) by setAttribute("style", ...) on the cell's <span>, which the
 *    policy blocks as an inline style attribute. On this page a span's
 *    setAttribute("style") sets the same declarations through the CSSOM
 *    (style.cssText), which the policy allows. Markup's style attributes stay
 *    blocked: only this page's own scripts (script-src 'self') can call it.
 * browser.sandbox asserts that the terminal raises no violation.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
"use strict";

(function () {
	var box = document.getElementById("terminal");
	var button = document.getElementById("terminal-connect");
	var status = document.getElementById("terminal-status");
	var term = null, fitter = null, ws = null, ended = false;
	var encoder = new TextEncoder(), decoder = null;

	if (!box || !button || !status)
		return;
	if (typeof window.Terminal !== "function" || !window.FitAddon || typeof window.FitAddon.FitAddon !== "function") {
		status.textContent = "The terminal could not start (its script did not load).";
		return;
	}

	function say(text) {
		status.textContent = text;
	}

	function send(obj) {
		if (ws && ws.readyState === WebSocket.OPEN)
			ws.send(typeof obj === "string" ? encoder.encode(obj) : JSON.stringify(obj));
	}

	/* A new size reaches the shell through term.onResize. */
	function fit() {
		fitter.fit();
	}

	/* A comment node standing in for a <style> element: its text goes to an adopted sheet. */
	function adoptedStyle() {
		var node = document.createComment(" xterm.js style (an adopted style sheet) ");
		var sheet = new CSSStyleSheet();
		var css = "";

		document.adoptedStyleSheets = document.adoptedStyleSheets.concat([sheet]);
		Object.defineProperty(node, "textContent", {
			get: function () { return css; },
			set: function (text) {
				css = String(text);
				sheet.replaceSync(css);
			}
		});
		node.remove = function () {
			document.adoptedStyleSheets = document.adoptedStyleSheets.filter(function (s) { return s !== sheet; });
			Comment.prototype.remove.call(this);
		};
		return node;
	}

	/* term.open() with its <style> elements made adopted sheets (see the top of this file). */
	function openAdopted() {
		var make = document.createElement;

		if (!("adoptedStyleSheets" in document) || typeof CSSStyleSheet.prototype.replaceSync !== "function") {
			term.open(box); /* an old browser: xterm's styles are blocked, the terminal still works */
			return;
		}
		document.createElement = function (name, options) {
			if (String(name).toLowerCase() === "style")
				return adoptedStyle();
			return make.call(document, name, options);
		};
		try {
			term.open(box);
		} finally {
			delete document.createElement; /* the prototype's again */
		}
	}

	/* A cell's colour, set as a style attribute by xterm.js: through the CSSOM instead. */
	function spanStylesThroughCssom() {
		var set = Element.prototype.setAttribute;

		HTMLSpanElement.prototype.setAttribute = function (name, value) {
			if (String(name).toLowerCase() === "style") {
				this.style.cssText = String(value);
				return;
			}
			set.call(this, name, value);
		};
	}

	function open() {
		term = new window.Terminal({ cursorBlink: true, fontSize: 14, scrollback: 2000 });
		fitter = new window.FitAddon.FitAddon();
		term.loadAddon(fitter);
		spanStylesThroughCssom();
		openAdopted();
		term.onData(function (data) {
			send(data);
		});
		term.onResize(function (size) {
			send({ type: "resize", cols: size.cols, rows: size.rows });
		});
		window.addEventListener("resize", fit);
		box.xterm = term; /* for the browser test, which reads the screen back */
	}

	function connect() {
		var scheme = location.protocol === "https:" ? "wss:" : "ws:";
		var url;

		if (!term)
			open();
		fitter.fit();
		url = scheme + "//" + location.host + box.getAttribute("data-ws") + "?cols=" + term.cols + "&rows=" +
		      term.rows + "&csrf=" + encodeURIComponent(box.getAttribute("data-csrf"));
		ended = false;
		decoder = new TextDecoder();
		ws = new WebSocket(url);
		ws.binaryType = "arraybuffer";
		button.disabled = true;
		say("Connecting…");
		ws.onopen = function () {
			say("Connected.");
			button.textContent = "Reconnect";
			term.focus();
		};
		ws.onmessage = function (e) {
			var msg;
			if (typeof e.data !== "string") {
				/* stream: a character cut between two frames is kept for the next. */
				term.write(decoder.decode(new Uint8Array(e.data), { stream: true }));
				return;
			}
			try {
				msg = JSON.parse(e.data);
			} catch (err) {
				return;
			}
			if (msg.type === "exit") {
				ended = true;
				say("The shell ended (status " + msg.status + ").");
			}
		};
		ws.onclose = function (e) {
			if (!ended)
				say(e.code === 1006 ? "Could not connect, or the connection was lost." :
				    "Disconnected" + (e.reason ? ": " + e.reason + "." : "."));
			button.disabled = false;
			ws = null;
		};
	}

	button.hidden = false;
	button.addEventListener("click", connect);
})();
