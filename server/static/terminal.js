/*
 * The terminal of a sandbox's dashboard page: xterm.js 5 and its fit addon
 * (/static/viewer/xterm.js and addon-fit.js, npm's browser builds, which set
 * window.Terminal and window.FitAddon) over the terminal
 * WebSocket of the page's sandbox (docs/rest.md, "Terminal"): binary frames
 * carry the terminal's bytes both ways, text frames JSON (resize from here,
 * exit from the server). The session's cookie authenticates the handshake;
 * the page's CSRF token (data-csrf) goes in its URL, as no form carries it.
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

	function open() {
		term = new window.Terminal({ cursorBlink: true, fontSize: 14, scrollback: 2000 });
		fitter = new window.FitAddon.FitAddon();
		term.loadAddon(fitter);
		term.open(box);
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
