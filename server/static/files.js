/*
 * The Files section of a sandbox's dashboard page: asks before a delete (a
 * directory goes with everything in it). Without this script the form
 * deletes at once.
 *
 * Copyright the libsaas authors. MIT licensed.
 */
"use strict";

(function () {
	document.querySelectorAll("form.file-delete").forEach(function (form) {
		form.addEventListener("submit", function (e) {
			var button = form.querySelector("button[data-name]");
			var name = button ? button.getAttribute("data-name") : "this";
			if (!window.confirm("Delete " + name + "? A directory is deleted with everything in it."))
				e.preventDefault();
		});
	});
})();
