/* The crawl dashboard: reads the JSON read API of `scrapy serve` (api/crawls,
   api/crawls/CRAWL/frontier, api/crawls/CRAWL/activity, api/crawls/CRAWL/record) every
   few seconds and shows it. No build step; the chart is uPlot's (uPlot.iife.min.js).

   The page's address may carry a fragment: #token=XYZ sends "Authorization: Bearer XYZ"
   with every request, and crawl=NAME picks the crawl (e.g. #token=XYZ&crawl=news). */
(function () {
  "use strict";

  const REFRESH_MS = 3000; // between the end of one refresh and the start of the next
  const CRAWLS_EVERY_MS = 30000; // the list of crawls is read again this often
  const REQUEST_TIMEOUT_MS = 10000;
  const ACTIVITY_MINUTES = 30;
  const MIN_CHART_BUCKETS = 18; // the chart spans 3 minutes at least (buckets of 10 s)
  // the UrlStore's fates (crawler/urlstore/store.py FATES), in their order, with colours
  const FATES = {
    fetched: "#2e7d32",
    duplicate: "#1565c0",
    robots_disallowed: "#8e24aa",
    refused: "#6d4c41",
    dns_error: "#ef6c00",
    timeout: "#f9a825",
    connection_error: "#c62828",
    error: "#d81b60",
    server_error: "#ad1457", // a worker's count of 5xx answers kept after their last try
  };
  const FAILED_FATES = ["refused", "dns_error", "timeout", "connection_error", "error", "server_error"];
  const EXTRA_COLOURS = ["#00838f", "#5d4037", "#546e7a", "#9e9d24", "#4527a0"];
  const BACKOFF_REASONS = ["robots", "down", "throttled"]; // frontier's hback reasons
  const NUMBER = new Intl.NumberFormat("en-US");

  const $ = (id) => document.getElementById(id);
  const state = {
    token: "",
    crawl: "",
    crawls: [],
    crawlsRead: 0,
    chart: null,
    chartFates: "",
    refreshes: 0,
    timer: null,
    running: false,
    again: false,
  };

  // -- the fragment: #token=...&crawl=... ----------------------------------------------
  function fragment() {
    const out = {};
    for (const part of location.hash.replace(/^#/, "").split("&")) {
      if (!part) continue;
      const i = part.indexOf("=");
      const name = i < 0 ? part : part.slice(0, i);
      const value = i < 0 ? "" : part.slice(i + 1);
      try {
        out[decodeURIComponent(name)] = decodeURIComponent(value);
      } catch (e) {
        out[name] = value;
      }
    }
    return out;
  }

  function setFragment() {
    const parts = [];
    if (state.token) parts.push("token=" + encodeURIComponent(state.token));
    if (state.crawl) parts.push("crawl=" + encodeURIComponent(state.crawl));
    history.replaceState(null, "", parts.length ? "#" + parts.join("&") : location.pathname + location.search);
  }

  // -- requests ---------------------------------------------------------------------------
  class ApiError extends Error {
    constructor(status, message, retryAfter) {
      super(message);
      this.status = status;
      this.retryAfter = retryAfter;
    }
  }

  function apiUrl(path) {
    return "api/" + path; // relative to the page: works behind a proxy's path prefix too
  }

  function crawlPath(what) {
    return "crawls/" + encodeURIComponent(state.crawl) + "/" + what;
  }

  async function api(path, method) {
    const headers = { Accept: "application/json" };
    if (state.token) headers.Authorization = "Bearer " + state.token;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), REQUEST_TIMEOUT_MS);
    let response;
    try {
      response = await fetch(apiUrl(path), {
        method: method || "GET",
        headers,
        cache: "no-store",
        signal: controller.signal,
      });
    } catch (e) {
      throw new ApiError(0, controller.signal.aborted ? "no answer within 10 s" : "server unreachable");
    } finally {
      clearTimeout(timer);
    }
    let body = null;
    try {
      body = await response.json();
    } catch (e) {
      body = null;
    }
    if (!response.ok) {
      const message = (body && body.error) || response.statusText || "error";
      throw new ApiError(response.status, message, response.headers.get("Retry-After"));
    }
    if (body === null) throw new ApiError(response.status, "the answer is not JSON");
    return body;
  }

  function describe(what, err) {
    const status = err.status;
    if (status === 503) return `${what}: store/Redis unavailable, retrying (${err.message})`;
    if (status === 401)
      return `${what}: not authorized (${err.message}); open the page as .../#token=YOUR_TOKEN`;
    if (status === 404) return `${what}: ${err.message}`;
    if (status === 0) return `${what}: ${err.message}, retrying`;
    return `${what}: HTTP ${status}: ${err.message}`;
  }

  // -- formatting -------------------------------------------------------------------------
  function setNumber(id, value, text) {
    const el = $(id);
    if (!el) return;
    if (value === null || value === undefined || Number.isNaN(value)) {
      el.dataset.value = "";
      el.textContent = "–";
      return;
    }
    el.dataset.value = String(value);
    el.textContent = text !== undefined ? text : NUMBER.format(value);
  }

  function bytes(n) {
    const units = ["B", "kB", "MB", "GB", "TB"];
    let i = 0;
    while (n >= 1000 && i < units.length - 1) {
      n /= 1000;
      i += 1;
    }
    return (i ? n.toFixed(1) : String(n)) + " " + units[i];
  }

  function clock(seconds) {
    const d = new Date(seconds * 1000);
    return d.toLocaleTimeString("en-GB", { hour12: false });
  }

  // a time (ms) as it stood when the numbers were read (``at``, the server's clock): the
  // same instant as the counts beside it, whatever this browser's clock says
  function inSeconds(ms, at) {
    if (ms === null || ms === undefined) return "after its download";
    const s = (ms - (at ?? Date.now())) / 1000;
    return s <= 0 ? "now" : "in " + (s < 10 ? s.toFixed(1) : Math.round(s)) + " s";
  }

  function cell(row, text, cls) {
    const td = document.createElement("td");
    td.textContent = text === null || text === undefined ? "" : String(text);
    if (cls) td.className = cls;
    row.appendChild(td);
    return td;
  }

  function fill(tbodySelector, rows, emptyText, columns) {
    const tbody = document.querySelector(tbodySelector);
    const frag = document.createDocumentFragment();
    if (!rows.length) {
      const tr = document.createElement("tr");
      tr.className = "empty";
      const td = cell(tr, emptyText, "muted");
      td.colSpan = columns;
      frag.appendChild(tr);
    }
    for (const make of rows) frag.appendChild(make());
    tbody.replaceChildren(frag);
  }

  function sumPrefix(totals, prefix) {
    let sum = 0;
    let any = false;
    for (const [key, n] of Object.entries(totals)) {
      if (key.startsWith(prefix)) {
        sum += Number(n) || 0;
        any = true;
      }
    }
    return any ? sum : 0;
  }

  function byPrefix(totals, prefix) {
    const out = [];
    for (const [key, n] of Object.entries(totals)) {
      if (key.startsWith(prefix)) out.push([key.slice(prefix.length), Number(n) || 0]);
    }
    return out;
  }

  // -- the crawls -------------------------------------------------------------------------
  async function loadCrawls() {
    const body = await api("crawls");
    state.crawls = Array.isArray(body.crawls) ? body.crawls : [];
    state.crawlsRead = Date.now();
    if (!state.crawl || !state.crawls.includes(state.crawl)) {
      const wanted = fragment().crawl;
      state.crawl = wanted && state.crawls.includes(wanted) ? wanted : body.default || state.crawls[0] || "";
    }
    const select = $("crawl");
    // the crawl shown is offered even before its keys or store exist (a crawl about to start)
    const offered = state.crawl && !state.crawls.includes(state.crawl) ? [state.crawl, ...state.crawls] : state.crawls;
    const names = offered.join("\n");
    if (select.dataset.names !== names) {
      select.replaceChildren(
        ...offered.map((name) => {
          const option = document.createElement("option");
          option.value = option.textContent = name;
          return option;
        })
      );
      select.dataset.names = names;
    }
    select.value = state.crawl;
    $("crawl-picker").hidden = offered.length < 2;
    $("crawl-name").textContent = state.crawl || "(none yet)";
  }

  // -- the frontier -----------------------------------------------------------------------
  function showFrontier(f) {
    setNumber("queued", f.queued);
    setNumber("leased", f.leased);
    setNumber("hosts-queued", f.hosts_with_urls ?? f.hosts_queued); // downloading hosts with URLs left too
    setNumber("hosts-seen", f.hosts_seen);
    setNumber("hosts-ready", f.hosts_queued); // in the ready heap: URLs queued, below their in-flight limit
    setNumber("hosts-due", f.hosts_due);
    setNumber("hosts-in-flight", f.hosts_in_flight);
    setNumber("in-flight", f.in_flight);
    setNumber("hosts-slowed", f.hosts_slowed);
    const status = f.status || {};
    const deferred = status.deferred || {};
    let backedOff = 0;
    const why = [];
    for (const reason of BACKOFF_REASONS) {
      const d = deferred[reason];
      if (d && d.hosts) {
        backedOff += d.hosts;
        why.push(`${reason}: ${d.hosts} hosts, ${d.urls} URLs`);
      }
    }
    setNumber("hosts-backed-off", backedOff);
    $("hosts-backed-off").title = why.join("\n");
    const badge = $("state");
    badge.textContent = status.state || "–";
    badge.className = "badge " + (status.state || "");
    const paused = (f.paused && Object.keys(f.paused.hosts || {})) || [];
    badge.title = paused.length ? `paused hosts: ${paused.join(", ")}` : "frontier state";
    // pause and resume: offered with a token (the server refuses them without one)
    $("steer").hidden = !state.token;
    $("pause").disabled = status.state === "paused";
    $("resume").disabled = status.state !== "paused";

    const hosts = (f.busiest && f.busiest.hosts) || [];
    fill(
      "#busiest tbody",
      hosts.map((h) => () => {
        const tr = document.createElement("tr");
        cell(tr, h.host);
        cell(tr, NUMBER.format(h.queued), "num");
        cell(tr, h.interval === null || h.interval === undefined ? "" : Number(h.interval).toFixed(2) + " s", "num");
        cell(tr, h.in_flight, "num");
        const b = h.backoff;
        cell(tr, b ? `${b.reason}, retried ${inSeconds(b.until, f.read_at)}` : "", b ? "bad" : "");
        // (a host waiting on disk for a window: due from its time there on)
        const later = h.next_due > (f.read_at ?? Date.now());
        const disk = later ? "on disk, due " + inSeconds(h.next_due, f.read_at) : "on disk, waiting for a window";
        cell(tr, h.on_disk ? disk : inSeconds(h.next_due, f.read_at));
        return tr;
      }),
      "no host has URLs queued",
      6
    );
  }

  // -- the activity -----------------------------------------------------------------------
  function fatesOf(activity) {
    const seen = new Set();
    for (const bucket of activity.series || []) for (const fate of Object.keys(bucket.fates || {})) seen.add(fate);
    for (const [fate] of byPrefix(activity.totals || {}, "pages/fate/")) seen.add(fate);
    if (!seen.size) seen.add("fetched");
    const known = Object.keys(FATES).filter((f) => seen.has(f));
    const others = [...seen].filter((f) => !(f in FATES)).sort();
    return known.concat(others);
  }

  function chartWidth() {
    return Math.max(300, $("chart").clientWidth || 600);
  }

  function showChart(activity) {
    const step = Number(activity.bucket_seconds) || 10;
    const all = activity.series || [];
    // from the bucket before the first with pages (a crawl that began lately is not a
    // spike at the right edge), but MIN_CHART_BUCKETS at least
    const first = all.findIndex((b) => b.fates && Object.keys(b.fates).length);
    const from = first < 0 ? all.length - MIN_CHART_BUCKETS : Math.min(first - 1, all.length - MIN_CHART_BUCKETS);
    const series = all.slice(Math.max(0, from));
    const fates = fatesOf(activity);
    const xs = series.map((b) => b.t);
    // the newest bucket is still filling: its pages over its elapsed part (by this
    // browser's clock, bounded to 2 s .. the bucket, so that a clock that differs cannot
    // skew it far), not over the whole bucket, lest the line always drop at its end
    const last = series.length - 1;
    const elapsed = last < 0 ? step : Math.min(step, Math.max(2, Date.now() / 1000 - series[last].t));
    const data = [xs];
    for (const fate of fates) {
      data.push(series.map((b, i) => ((b.fates && b.fates[fate]) || 0) / (i === last ? elapsed : step)));
    }
    const span = Math.round((series.length * step) / 60);
    $("chart-note").textContent = `(buckets of ${step} s, last ${span} minutes)`;
    const key = fates.join(",");
    if (!state.chart || state.chartFates !== key) {
      if (state.chart) state.chart.destroy();
      let extra = 0;
      const opts = {
        width: chartWidth(),
        height: 260,
        scales: { x: { time: true }, y: { range: (u, min, max) => [0, Math.max(1, max * 1.1)] } },
        series: [
          { value: (u, v) => (v === null || v === undefined ? "–" : clock(v)) }, // 24-hour, as elsewhere
          ...fates.map((fate) => ({
            label: fate,
            stroke: FATES[fate] || EXTRA_COLOURS[extra++ % EXTRA_COLOURS.length],
            width: 2,
            points: { show: false },
            value: (u, v) => (v === null || v === undefined ? "–" : v.toFixed(2)),
          })),
        ],
        axes: [{ values: (u, splits) => splits.map((v) => clock(v)) }, { label: "pages/s", size: 60 }],
        legend: { live: true },
      };
      state.chart = new uPlot(opts, data, $("chart"));
      state.chartFates = key;
    } else {
      state.chart.setData(data);
    }
    // the rate over the last complete bucket and the one still filling
    const pages = (b) => Object.values((b && b.fates) || {}).reduce((a, n) => a + (Number(n) || 0), 0);
    if (last >= 0) {
      const previous = last > 0 ? series[last - 1] : null;
      const rate = (pages(previous) + pages(series[last])) / ((previous ? step : 0) + elapsed);
      setNumber("pages-rate", rate, rate.toFixed(1));
    } else {
      setNumber("pages-rate", null);
    }
    // pages recorded in the last minute (as the pages card counts them, by the workers'
    // records; not the acknowledgements, which wait for the archive's batch)
    const minute = Math.ceil(60 / step);
    setNumber("pages-last-minute", all.slice(-minute).reduce((a, b) => a + pages(b), 0));
  }

  function showTotals(totals) {
    const fates = byPrefix(totals, "pages/fate/");
    setNumber("pages-total", fates.length ? fates.reduce((a, [, n]) => a + n, 0) : 0);
    setNumber("pages-fetched", Number(totals["pages/fate/fetched"]) || 0);
    setNumber("robots-denied", Number(totals["robotstxt/disallowed"]) || 0);
    setNumber("dup-exact", Number(totals["contentseen/exact"]) || 0);
    setNumber("dup-near", Number(totals["contentseen/near"]) || 0);
    setNumber("trap-refusals", sumPrefix(totals, "frontier/trap/"));
    setNumber("archive-objects", Number(totals["archive/objects"]) || 0);
    const archived = Number(totals["archive/bytes"]) || 0;
    setNumber("archive-bytes", archived, bytes(archived));
    // uploads tried again, and any archive/* counter of what went wrong for good
    setNumber("archive-retries", Number(totals["archive/retries"]) || 0);
    const archiveBad = byPrefix(totals, "archive/").filter(([k]) => /fail|error|lost/.test(k));
    setNumber("archive-failures", archiveBad.reduce((a, [, n]) => a + n, 0));
    $("archive-failures").title = archiveBad.map(([k, n]) => `archive/${k}: ${n}`).join("\n");
    setNumber("store-writes", sumPrefix(totals, "urlstore/written/"));
    setNumber("store-failures", sumPrefix(totals, "urlstore/failed"));
    for (const id of ["archive-failures", "store-failures"]) {
      $(id).classList.toggle("bad", Number($(id).dataset.value) > 0);
    }

    // errors by kind: the pages whose fate is a failure, then the downloader's exceptions
    // (each try counts; robots.txt denials are counted above, not as errors)
    const errors = [];
    for (const fate of FAILED_FATES) {
      const n = Number(totals["pages/fate/" + fate]) || 0;
      if (n) errors.push(["fate: " + fate, n, "pages that failed: pages/fate/" + fate]);
    }
    const exceptions = byPrefix(totals, "downloader/exception_type_count/")
      .filter(([k]) => !k.endsWith("RobotsDisallowed"))
      .map(([k, n]) => ["exception: " + k.split(".").pop(), n, "download tries: " + k]);
    const order = (a, b) => b[1] - a[1] || a[0].localeCompare(b[0]);
    errors.sort(order);
    errors.push(...exceptions.sort(order));
    fill(
      "#errors tbody",
      errors.map(([kind, n, key]) => () => {
        const tr = document.createElement("tr");
        cell(tr, kind).title = key;
        cell(tr, NUMBER.format(n), "num");
        return tr;
      }),
      "no errors",
      2
    );
    const statuses = byPrefix(totals, "downloader/response_status_count/").sort((a, b) => a[0].localeCompare(b[0]));
    fill(
      "#statuses tbody",
      statuses.map(([status, n]) => () => {
        const tr = document.createElement("tr");
        cell(tr, status, Number(status) >= 400 ? "bad" : "");
        cell(tr, NUMBER.format(n), "num");
        return tr;
      }),
      "no answers yet",
      2
    );
  }

  function recordHref(url) {
    return apiUrl(crawlPath("record") + "?url=" + encodeURIComponent(url));
  }

  function showRecent(recent) {
    fill(
      "#recent tbody",
      recent.map((page) => () => {
        const tr = document.createElement("tr");
        cell(tr, page.at ? clock(page.at) : "");
        cell(tr, page.status === null || page.status === undefined ? "–" : page.status, "num");
        cell(tr, page.fate, FAILED_FATES.includes(page.fate) ? "bad" : "");
        cell(tr, page.title || "", "title");
        const td = cell(tr, "", "url");
        const a = document.createElement("a");
        a.className = "record-link";
        a.href = recordHref(page.url);
        a.dataset.url = page.url;
        a.textContent = page.url;
        a.title = "the page's record";
        td.appendChild(a);
        return tr;
      }),
      "no page yet",
      5
    );
  }

  function showActivity(activity) {
    showChart(activity);
    showTotals(activity.totals || {});
    showRecent(activity.recent || []);
    setNumber("workers", activity.workers);
    // workers at their bound of pages not yet stored (crawler/scheduler/pacing.py)
    const waiting = activity.waiting || [];
    $("workers-waiting").textContent = waiting.length
      ? `${waiting.length} waiting for ${waiting[0].for}${waiting[0].why ? ": " + waiting[0].why : ""}` +
        ` (${waiting.reduce((n, w) => n + w.pages, 0)} pages not stored)`
      : "publishing";
  }

  // -- a page's record --------------------------------------------------------------------
  async function openRecord(url, href) {
    const panel = $("record");
    panel.hidden = false;
    $("record-raw").href = href;
    const pre = $("record-json");
    pre.textContent = "loading " + url + " …";
    pre.className = "";
    try {
      const record = await api(crawlPath("record") + "?url=" + encodeURIComponent(url));
      pre.textContent = JSON.stringify(record, null, 2);
    } catch (err) {
      pre.textContent = describe("record", err);
      pre.className = "bad";
    }
    panel.scrollIntoView({ block: "nearest" });
  }

  // -- the refresh loop -------------------------------------------------------------------
  function showProblems(problems) {
    const box = $("message");
    box.hidden = !problems.length;
    box.textContent = problems.join("\n");
  }

  async function refresh() {
    if (state.running) {
      state.again = true; // once this one ends (a new crawl was picked meanwhile)
      return;
    }
    state.running = true;
    state.again = false;
    clearTimeout(state.timer);
    const problems = [];
    try {
      if (!state.crawls.length || Date.now() - state.crawlsRead > CRAWLS_EVERY_MS) {
        try {
          await loadCrawls();
        } catch (err) {
          problems.push(describe("crawls", err));
        }
      }
      const crawl = state.crawl;
      if (crawl) {
        const [frontier, activity] = await Promise.allSettled([
          api(crawlPath("frontier")),
          api(crawlPath("activity") + "?minutes=" + ACTIVITY_MINUTES),
        ]);
        if (crawl !== state.crawl) return; // another crawl was picked meanwhile: not its numbers
        if (frontier.status === "fulfilled") showFrontier(frontier.value);
        else problems.push(describe("frontier", frontier.reason));
        if (activity.status === "fulfilled") showActivity(activity.value);
        else {
          problems.push(describe("activity", activity.reason));
          try {
            // the frontier gone (a finished crawl whose Redis is away): what its UrlStore holds
            const store = await api(crawlPath("store"));
            setNumber("pages-total", store.records);
            setNumber("pages-fetched", Number(store.fates.fetched) || 0);
            problems.push("pages: from the UrlStore (the crawl's live numbers are not there)");
          } catch (err) {
            // (no UrlStore to count either: the dashes stay)
          }
        }
        if (frontier.status === "fulfilled" || activity.status === "fulfilled") {
          $("updated").textContent = "updated " + clock(Date.now() / 1000);
        }
      } else if (!problems.length) {
        problems.push("no crawl yet: start one with scrapy crawl broad");
      }
    } catch (err) {
      problems.push("dashboard: " + (err && err.message ? err.message : String(err)));
    } finally {
      if (!state.again) {
        showProblems(problems);
        state.refreshes += 1;
        document.body.dataset.refreshes = String(state.refreshes);
        document.body.classList.toggle("failing", problems.length > 0);
      }
      state.running = false;
      state.timer = setTimeout(refresh, state.again ? 0 : REFRESH_MS);
    }
  }

  function start() {
    const f = fragment();
    state.token = f.token || "";
    state.crawl = f.crawl || "";
    $("crawl").addEventListener("change", (e) => {
      state.crawl = e.target.value;
      $("crawl-name").textContent = state.crawl;
      $("record").hidden = true;
      if (state.chart) {
        state.chart.destroy();
        state.chart = null;
      }
      setFragment();
      refresh();
    });
    window.addEventListener("hashchange", () => {
      const g = fragment();
      state.token = g.token || "";
      if (g.crawl && g.crawl !== state.crawl) {
        state.crawl = g.crawl;
        state.crawlsRead = 0;
      }
      refresh();
    });
    $("recent").addEventListener("click", (e) => {
      const a = e.target.closest("a.record-link");
      if (!a || e.button !== 0 || e.ctrlKey || e.metaKey || e.shiftKey || e.altKey) return;
      e.preventDefault(); // shown here, with the token (a new tab's request would have none)
      openRecord(a.dataset.url, a.href);
    });
    for (const verb of ["pause", "resume"]) {
      $(verb).addEventListener("click", async () => {
        try {
          await api(crawlPath(verb), "POST");
        } catch (err) {
          showProblems([describe(verb, err)]);
        }
        refresh();
      });
    }
    $("record-close").addEventListener("click", () => {
      $("record").hidden = true;
    });
    window.addEventListener("resize", () => {
      if (state.chart) state.chart.setSize({ width: chartWidth(), height: 260 });
    });
    refresh();
  }

  start();
})();
