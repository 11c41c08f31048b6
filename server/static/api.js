// Starts Swagger UI on /docs/api. A file of its own because the pages' CSP
// runs no inline script. The OpenAPI document names the default listen
// address as its server; "Try it out" goes to the server that served this
// page instead, the only origin the CSP lets the page reach.
'use strict';

window.addEventListener('DOMContentLoaded', async () => {
  const root = document.getElementById('swagger-ui');
  if (!root || typeof window.SwaggerUIBundle !== 'function') return;
  try {
    const res = await fetch('/openapi.json', { credentials: 'omit' });
    const spec = await res.json();
    spec.servers = [{ url: window.location.origin }];
    window.SwaggerUIBundle({ spec, domNode: root, deepLinking: true, tryItOutEnabled: false });
  } catch (err) {
    const p = document.createElement('p');
    p.className = 'notice';
    p.textContent = 'The reference could not be loaded (' + err + '); /openapi.json has it.';
    root.replaceChildren(p);
  }
});
