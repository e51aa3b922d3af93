// The deployment and node pages in headless Chromium (Debian's /usr/bin/chromium through
// playwright-core, which downloads no browser), as an operator clicks through them: three
// simulated nodes (their agents played here over the real protocol, as tests/deploy.rs plays
// them) are deployed from the environment page's Deploy button, one compute's nova-compute fails;
// then the environment page (its plan's picture zoomed, fitted, at 100%), its deployment's page,
// the runs filtered to the failed one, an output opened, the filter typed from the keyboard, the
// node's page and its deployment history; at 1280 and 900 px wide, with no sideways scrolling
// but inside the scrollable picture boxes, no console error (a CSP violation is one), and the
// filter working without JavaScript. Screenshots go to OUT_DIR (pages-*.png).
// Usage: node browser-pages.mjs BASE_URL ADMIN_PASSWORD OUT_DIR
import { chromium } from "playwright-core";

const [base, password, out] = process.argv.slice(2);
let pass = 0, fail = 0;
const ok = (cond, what) => {
  if (cond) { pass++; } else { fail++; console.log(`FAIL ${what}`); }
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// The API, as an admin's token and as the nodes' agents.
async function call(method, path, body, token) {
  const headers = { "content-type": "application/json" };
  if (token) { headers.authorization = `Bearer ${token}`; }
  const r = await fetch(`${base}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, json, text };
}
const login = await call("POST", "/api/v1/login", { username: "admin", password });
const admin = login.json && login.json.token;
ok(!!admin, `an API token for the set-up (${login.status})`);
const version = (await call("GET", "/api/v1/version")).json.version;
const release = (await call("GET", "/api/v1/releases", undefined, admin)).json[0].id;
const env = await call("POST", "/api/v1/clusters", { name: "browser-env", release_id: release }, admin);
ok(env.status === 201, `the environment is created (${env.status} ${env.text})`);
const cluster = env.json.id;

const inventory = (mac, i) => ({
  interfaces: [{ name: "eno1", mac, speed_mbps: 10000, link: true }],
  cpu: { count: 16, model: "Intel(R) Xeon(R) Silver 4314" }, memory_bytes: 137438953472,
  disks: [{ name: "sda", size_bytes: 480103981056, model: "SAMSUNG MZ7L3480", serial: `S6KM${i}` }],
  system: { vendor: "Dell Inc.", product: "PowerEdge R650", serial: `7XK2Q${i}` }, boot_mode: "uefi",
});
const nodes = [];
for (const [i, role] of ["controller", "compute", "compute"].entries()) {
  const mac = `52:54:00:00:60:0${i + 1}`;
  const hello = await call("POST", "/api/v1/agent/hello", inventory(mac, i));
  ok(hello.status === 201, `node ${i + 1} says hello (${hello.status})`);
  const id = hello.json.node.id;
  const put = await call("PUT", `/api/v1/clusters/${cluster}/nodes/${id}`, { roles: [role] }, admin);
  ok(put.status === 200, `node ${id} gets ${role} (${put.status} ${put.text})`);
  nodes.push({ id, mac, role, token: hello.json.agent_token, credential: null });
}
const [controller, computeA] = nodes;

// What a task prints: puppet-like lines, many for some, an error at the end of the failing one.
function output(name, failing) {
  const lines = [`Notice: Compiled catalog for ${name} in environment production in 0.42 seconds`];
  const many = name === "netconfig" || failing ? 140 : 3;
  for (let i = 0; i < many; i++) {
    lines.push(`Notice: /Stage[main]/${name}/Exec[step-${i}]/returns: executed successfully`);
  }
  if (failing) {
    lines.push("Error: /Stage[main]/Nova::Compute/Service[nova-compute]: Could not start Service[nova-compute]: Execution of '/usr/bin/systemctl start nova-compute' returned 1");
    lines.push("Error: Failed to apply catalog: nova-compute did not start within 60 seconds");
  } else {
    lines.push(`Notice: Applied catalog in 1.${many} seconds`);
  }
  return lines.join("\n");
}

// One node's agent: ask, run (some steps take a second, so the timeline has bars of some
// length), report; the bootstrap's agent until reboot_to_disk, then the installed OS's.
let failed = false;
async function agent(node, dep) {
  let idle = 0;
  while (idle < 40) {
    const r = await call("POST", "/api/v1/agent/next", { node_id: node.id }, node.token);
    if (r.status !== 200) { ok(false, `next for node ${node.id}: ${r.status} ${r.text}`); return; }
    if (r.json.action !== "run") {
      const d = await call("GET", `/api/v1/deployments/${dep}`, undefined, admin);
      if (d.json.status !== "running") { return; }
      idle++;
      await sleep(150);
      continue;
    }
    idle = 0;
    const run = r.json.run;
    const name = run.task ? run.task.id : `${run.step.interface}.${run.step.name}`;
    if (name === "deploy.configure") { node.credential = run.step.args.os_agent.config.credential; }
    const failing = name === "nova-compute" && node === computeA && !failed;
    if (failing) { failed = true; }
    if (["deploy.configure", "netconfig", "hiera", "nova-compute", "openstack-controller"].includes(name)) {
      await sleep(1100);
    }
    const rep = await call("POST", `/api/v1/agent/runs/${run.id}/result`, {
      attempt: run.attempt, ok: !failing, exit_code: failing ? 1 : 0,
      output_tail: run.task ? output(name, failing) : `${name}: done`,
      error: failing ? "exit status 1: nova-compute did not start" : null,
    }, node.token);
    ok(rep.status === 200, `node ${node.id} reports ${name} (${rep.status} ${rep.text})`);
    if (name === "power.reboot_to_disk") {
      const h = await call("POST", "/api/v1/agent/service/hello",
        { node_id: node.id, credential: node.credential, version, macs: [node.mac] });
      ok(h.status === 200, `node ${node.id}'s installed OS says hello (${h.status} ${h.text})`);
      node.token = h.json.agent_token;
    }
  }
}

// A page whose deployment changes reloads itself (live.js's data-live-reload, 300 ms after the
// event): a goto that lands in that moment is aborted by the page's own reload, not by the
// server (Chromium says net::ERR_ABORTED, or Playwright that the navigation "is interrupted by
// another navigation"). Such a navigation is made again; any other failure is the test's.
async function visit(p, url) {
  for (let attempt = 1; ; attempt++) {
    try {
      return await p.goto(url);
    } catch (e) {
      const reloaded = String(e).includes("net::ERR_ABORTED")
        || String(e).includes("is interrupted by another navigation");
      if (attempt >= 3 || !reloaded) { throw e; }
      await sleep(500);
    }
  }
}

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
const page = await context.newPage();
const errors = [];
page.on("console", (m) => { if (m.type() === "error") { errors.push(`${m.text()} (${m.location().url})`); } });
page.on("pageerror", (e) => errors.push(String(e)));

await visit(page, `${base}/login`);
await page.fill("#username", "admin");
await page.fill("#password", password);
await Promise.all([page.waitForNavigation(), page.click("#sign-in")]);

// Deploy from the environment page, as an operator would; the agents take their runs.
await visit(page, `${base}/environments/${cluster}`);
ok((await page.content()).includes("Tasks are numbered per node"), "the plan says how tasks are numbered");
// Deploy asks first (data-confirm); accepted, it starts.
let deployAsked = "";
page.once("dialog", (d) => { deployAsked = d.message(); d.accept(); });
await Promise.all([page.waitForNavigation(), page.click('form[action$="/deploy"] button')]);
ok(deployAsked.startsWith("Deploy browser-env?"), `Deploy asks first (${deployAsked})`);
const started = await page.textContent("#notice");
const dep = Number((started.match(/Deployment (\d+) started/) || [])[1]);
ok(dep > 0, `the Deploy button starts a deployment (${started})`);
// While it runs, the page refreshes its parts by itself (live.js); the agents run meanwhile.
const agents = Promise.all(nodes.map((n) => agent(n, dep)));
await sleep(2500);
ok((await page.content()).includes('data-status="running"'), "the environment page shows it running");
await page.screenshot({ path: `${out}/pages-environment-running.png`, fullPage: true });
await agents;
ok(failed, "one compute's nova-compute failed");
await page.waitForFunction(() => document.querySelector('[data-status="error"]') !== null, null, { timeout: 15000 })
  .catch(() => ok(false, "the environment page learns the deployment ended without a reload"));

// No sideways scrolling on the page itself (the picture boxes scroll inside).
async function fits(what) {
  const [scroll, client] = await page.evaluate(() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]);
  ok(scroll <= client, `${what}: no sideways scrolling (${scroll} > ${client})`);
}

for (const width of [1280, 900]) {
  await page.setViewportSize({ width, height: 900 });
  const at = `at ${width} px`;
  await visit(page, `${base}/environments/${cluster}`);
  await fits(`the environment page ${at}`);
  // The plan's picture: fit to the box, then 100%, then zoom out.
  const graph = page.locator("#plan-picture svg");
  ok(await page.isVisible(".zoom-bar"), `the zoom buttons are offered ${at}`);
  const full = Number(await page.getAttribute("#plan-picture", "data-width"));
  await page.click('[data-zoom="fit"]');
  const box = await page.evaluate(() => document.getElementById("plan-picture").clientWidth);
  const fitted = Number(await graph.getAttribute("width"));
  ok(fitted <= box && fitted > 0, `Fit makes the graph as wide as its box ${at} (${fitted} in ${box})`);
  await page.click('[data-zoom="actual"]');
  ok(Number(await graph.getAttribute("width")) === full, `100% shows the graph at its size ${at}`);
  await page.click('[data-zoom="out"]');
  ok(Number(await graph.getAttribute("width")) < full, `zoom out shrinks it ${at}`);
  await page.click('[data-zoom="fit"]');
  await page.screenshot({ path: `${out}/pages-environment-${width}.png`, fullPage: true });

  // Its deployment's page, from the environment page.
  await Promise.all([page.waitForNavigation(), page.click(`#deployment .dep-line a[href="/deployments/${dep}"]`)]);
  ok(page.url() === `${base}/deployments/${dep}`, `the environment links its deployment (${page.url()})`);
  let html = await page.content();
  ok(html.includes("by admin"), `the deployment says who started it ${at}`);
  ok(html.includes("run as") && html.includes("steps: the nodes also run"), `it explains tasks and steps ${at}`);
  ok(html.includes('class="tl-legend"'), `the timeline has a legend ${at}`);
  await fits(`the deployment page ${at}`);
  await page.screenshot({ path: `${out}/pages-deployment-${width}.png`, fullPage: true });

  // Filter to the failed run: its output is open, with the error.
  await page.selectOption("#f-status", "failed");
  await Promise.all([page.waitForNavigation(), page.click("#f-apply")]);
  ok(page.url().includes("status=failed"), `the filter is a link ${at} (${page.url()})`);
  const failedRows = await page.locator("tr.run").count();
  ok(failedRows === 1, `one failed run is shown ${at} (${failedRows})`);
  ok(await page.locator("tr.run-failed + tr.run-more details[open]").count() === 1, `its output is open ${at}`);
  html = await page.content();
  ok(html.includes("nova-compute did not start"), `its error and output are on the page ${at}`);
  await fits(`the filtered deployment page ${at}`);
  await page.screenshot({ path: `${out}/pages-deployment-failed-${width}.png`, fullPage: true });

  // The controller's runs; open the output of one that went well.
  await page.selectOption("#f-status", "");
  await page.selectOption("#f-node", String(controller.id));
  await Promise.all([page.waitForNavigation(), page.click("#f-apply")]);
  const closed = page.locator("tr.run-ok + tr.run-more details:not([open]) summary").first();
  await closed.click();
  ok(await page.locator("tr.run-ok + tr.run-more details[open]").count() >= 1, `an output opens ${at}`);
  await fits(`the controller's runs ${at}`);
  await page.screenshot({ path: `${out}/pages-deployment-output-${width}.png`, fullPage: true });

  // The filter from the keyboard: type a name, Enter.
  await page.focus("#f-q");
  await page.keyboard.type("nova");
  await Promise.all([page.waitForNavigation(), page.keyboard.press("Enter")]);
  ok(page.url().includes("q=nova"), `Enter applies the typed filter ${at} (${page.url()})`);
  const names = await page.locator("tr.run td.step .mono").allTextContents();
  ok(names.length > 0 && names.every((n) => n.includes("nova")), `only matching runs ${at} (${names.join(", ")})`);

  // The failing node's page, from its section; then its deployment history.
  await visit(page, `${base}/deployments/${dep}?status=failed`);
  await Promise.all([page.waitForNavigation(), page.click(`#node-${computeA.id} .node-name a`)]);
  ok(page.url() === `${base}/nodes/${computeA.id}`, `the node links its page (${page.url()})`);
  html = await page.content();
  for (const want of ["browser-env", "compute", "deploy failed", "nova-compute: exit status 1", "Log tail", "Activity", "PowerEdge R650"]) {
    ok(html.includes(want), `the node page shows ${want} ${at}`);
  }
  await fits(`the node page ${at}`);
  await page.screenshot({ path: `${out}/pages-node-${width}.png`, fullPage: true });
  await Promise.all([page.waitForNavigation(), page.click(`#deployments h3 a[href^="/deployments/${dep}"]`)]);
  ok(page.url().startsWith(`${base}/deployments/${dep}?node=${computeA.id}`), `its history links the deployment, its runs (${page.url()})`);
  ok(await page.locator("tr.run").count() > 3, `the node's runs are listed ${at}`);
  await page.screenshot({ path: `${out}/pages-node-history-${width}.png`, fullPage: true });

  // The environment's whole history.
  await visit(page, `${base}/environments/${cluster}/deployments`);
  ok((await page.content()).includes(`href="/deployments/${dep}"`), `the history page lists the deployment ${at}`);
  await fits(`the history page ${at}`);
  await page.screenshot({ path: `${out}/pages-history-${width}.png`, fullPage: true });
}

// A bad filter says what is wrong (a 400 page, which Chromium logs as a failed load).
// Its runs part is fetched again once the event stream is ready (live.js), with the same
// filter, and answers 400 too: wait for that before counting the console's messages.
const before = errors.length;
const refetched = page.waitForEvent("console", { predicate: (m) => m.type() === "error" && m.location().url.includes(`/deployments/${dep}/runs?`), timeout: 10000 }).catch(() => null);
const bad = await visit(page, `${base}/deployments/${dep}?status=broken&node=x`);
ok((await refetched) !== null, "the live runs part is fetched again once the stream is ready (a 400 too)");
ok(bad.status() === 400, `a bad filter is a 400 (${bad.status()})`);
ok(errors.splice(before).every((e) => e.includes("400")), "its only console message is the 400");
let html = await page.content();
ok(html.includes("The filter is not applied") && html.includes("is not a run status") && html.includes("is not a node id"),
   "a bad filter is explained, each parameter");
await page.screenshot({ path: `${out}/pages-deployment-bad-filter.png`, fullPage: true });

// Without JavaScript: the filter still works (a GET form), the picture box still scrolls and
// offers no dead zoom buttons.
const bare = await browser.newContext({ viewport: { width: 900, height: 900 }, javaScriptEnabled: false });
const nojs = await bare.newPage();
await visit(nojs, `${base}/login`);
await nojs.fill("#username", "admin");
await nojs.fill("#password", password);
await Promise.all([nojs.waitForNavigation(), nojs.click("#sign-in")]);
await visit(nojs, `${base}/deployments/${dep}`);
await nojs.selectOption("#f-status", "failed");
await Promise.all([nojs.waitForNavigation(), nojs.click("#f-apply")]);
ok(nojs.url().includes("status=failed") && await nojs.locator("tr.run").count() === 1, "the filter works without JavaScript");
await visit(nojs, `${base}/environments/${cluster}`);
ok(!(await nojs.isVisible(".zoom-bar")), "without JavaScript there are no zoom buttons");
const scrolls = await nojs.evaluate(() => { const b = document.getElementById("plan-picture"); return getComputedStyle(b).overflow; });
ok(scrolls.includes("auto"), `without JavaScript the picture box scrolls (${scrolls})`);
await nojs.screenshot({ path: `${out}/pages-environment-nojs-900.png`, fullPage: true });
await bare.close();

ok(errors.length === 0, `no console errors (${errors.join("; ")})`);
await browser.close();
console.log(`browser-pages: ${pass} passed, ${fail} failed`);
process.exit(fail === 0 ? 0 : 1);
