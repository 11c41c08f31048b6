// The dashboard's terminal: xterm.js (Debian's node-xterm, its CommonJS
// modules) and its fit addon, bundled by esbuild at build time into one
// script that sets window.Terminal (server/CMakeLists.txt). Debian's
// libjs-xterm would be the obvious package, but its xterm.js is a stub that
// require()s the modules, which no browser can load.
var Terminal = require('xterm/lib/public/Terminal').Terminal;
Terminal.applyAddon(require('xterm/lib/addons/fit/fit'));
window.Terminal = Terminal;
