// kb-ray viewer (docs/viewer.md): plain JS over the service's own /v1 API, no build step.
// Every text from the service goes into the page as text (textContent), never as HTML.
"use strict";

// Why a sentence of an answer is unsupported (kb_ray/answer/types.py: Sentence.problem), in words.
const PROBLEM_TEXT = {
  no_citation: "it cites nothing",
  unknown_citation: "it cites a passage that is not in the answer",
  unsupported: "its citations do not back it",
};
const KEY_STORE = "kb-ray.apiKey";
const FALLBACK_MODES = ["hybrid", "dense", "lexical"];
const PDF = "application/pdf";
const PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation";
const PAGED = [PDF, PPTX];  // formats with page images (a PPTX through LibreOffice on the service)
const $ = (id) => document.getElementById(id);
const state = { hits: [], selected: -1, answer: null, doc: null, page: 1, cite: null, imageUrl: null };

class ApiError extends Error {
  constructor(status, detail, reason = null) {
    super(`${status}: ${detail}`);
    this.status = status;
    this.detail = detail;
    this.reason = reason;  // the route's reason code (X-Kb-Ray-Reason), where it gives one
  }
}

// -- the API, with the key the user typed (kept in sessionStorage: gone when the tab closes) --------

function apiKey() { return sessionStorage.getItem(KEY_STORE) || ""; }

async function api(path, { json, raw } = {}) {
  const headers = new Headers();
  if (apiKey()) headers.set("Authorization", `Bearer ${apiKey()}`);
  const init = { method: "GET", headers };
  if (json !== undefined) {
    headers.set("Content-Type", "application/json");
    Object.assign(init, { method: "POST", body: JSON.stringify(json) });
  }
  const response = await fetch(path, init);
  if (!response.ok) {
    let detail = response.statusText;
    try { detail = (await response.json()).detail ?? detail; } catch { /* not JSON */ }
    throw new ApiError(response.status, typeof detail === "string" ? detail : JSON.stringify(detail),
                       response.headers.get("X-Kb-Ray-Reason"));
  }
  return raw ? response : response.json();
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "style") Object.assign(node.style, value);  // CSSOM: allowed by the page's CSP
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== null && child !== undefined) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

function showError(error) {
  const box = $("error");
  if (!error) { box.hidden = true; box.textContent = ""; return; }
  let text = error.message || String(error);
  if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
    text = `the service refused the API key (${error.status}): ${error.detail}. Enter a valid key above.`;
    clearData();
  }
  box.textContent = text;
  box.hidden = false;
}

function clearData() {
  state.hits = []; state.answer = null; state.doc = null;
  $("results").replaceChildren(); $("answer").replaceChildren(); $("answer").hidden = true;
  $("abstain").hidden = true; $("search-status").textContent = "";
  for (const id of ["doc-title", "doc-meta", "sections", "chunks", "versions", "lineage", "boxes", "canonical", "legend"]) {
    $(id).replaceChildren();
  }
  $("page-frame").hidden = true; $("page-nav").hidden = true; $("canonical").hidden = true;
  setImage(null);
}

// -- routing: /ui?q=&mode=&collection=&tags=&mime=&answer=1 and /ui/doc/{id}?page=&hl= ---------------

function navigate(url, historyState = null) {
  history.pushState(historyState, "", url);
  route();
}

function route() {
  showError(null);
  const params = new URLSearchParams(location.search);
  const match = location.pathname.match(/^\/ui\/doc\/([^/]+)\/?$/);
  if (match) {
    showView("doc");
    openDocument(decodeURIComponent(match[1]), {
      page: Number(params.get("page")) || null, hl: params.get("hl"), cite: history.state?.cite ?? null,
    });
    return;
  }
  showView("search");
  fillForm(params);
  if (params.get("q")) {
    sessionStorage.setItem("kb-ray.lastSearch", params.toString());
    runSearch();
    if (params.get("answer") === "1") runAnswer(); else { $("answer").hidden = true; }
  }
}

function showView(name) {
  $("search-view").hidden = name !== "search";
  $("doc-view").hidden = name !== "doc";
}

function fillForm(params) {
  $("q").value = params.get("q") || "";
  const mode = params.get("mode");
  if (mode && ![...$("mode").options].some((option) => option.value === mode)) $("mode").append(el("option", { value: mode }, mode));
  $("mode").value = mode || "hybrid";
  $("f-collection").value = params.get("collection") || "";
  $("f-tags").value = params.get("tags") || "";
  $("f-mime").value = params.get("mime") || "";
}

function formParams(withAnswer) {
  const params = new URLSearchParams({ q: $("q").value.trim(), mode: $("mode").value });
  for (const [name, id] of [["collection", "f-collection"], ["tags", "f-tags"], ["mime", "f-mime"]]) {
    if ($(id).value.trim()) params.set(name, $(id).value.trim());
  }
  if (withAnswer) params.set("answer", "1");
  return params;
}

function searchFilter() {
  const list = (id) => $(id).value.split(",").map((value) => value.trim()).filter(Boolean);
  const filter = {};
  if (list("f-collection").length) filter.collection = list("f-collection");
  if (list("f-tags").length) filter.tags_any = list("f-tags");
  if (list("f-mime").length) filter.mime = list("f-mime");
  return Object.keys(filter).length ? filter : null;
}

// -- search ------------------------------------------------------------------------------------

async function runSearch() {
  const query = $("q").value.trim();
  $("search-status").textContent = `Searching for “${query}”…`;
  $("results").replaceChildren(); $("abstain").hidden = true;
  try {
    const result = await api("/v1/search", { json: { query, k: 10, mode: $("mode").value, filter: searchFilter() } });
    renderHits(result);
  } catch (error) {
    $("search-status").textContent = "";
    showError(error);
  }
}

function renderHits(result) {
  state.hits = result.hits; state.selected = -1;
  const best = Math.max(...result.hits.map((hit) => hit.confidence ?? 0), 0);
  $("search-status").textContent = `${result.hits.length} hits · ${result.mode} · generation ${result.generation}`;
  if (result.abstain) {
    $("abstain").textContent = `no hit is confident enough (best confidence ${best.toFixed(2)}); the knowledge base may not answer this.`;
    $("abstain").hidden = false;
  }
  $("results").replaceChildren(...result.hits.map((hit, index) => hitItem(hit, index, result.abstain)));
}

function hitItem(hit, index, abstained) {
  const page = citedPage(hit);
  const ranks = Object.entries(hit.ranks || {}).filter(([, rank]) => rank !== null).map(([name, rank]) => `${name} ${rank}`);
  const confidence = hit.confidence === null || hit.confidence === undefined ? "–" : hit.confidence.toFixed(2);
  const tip = `ranks: ${ranks.join(", ")}\nconfidence ${confidence}` +
    (hit.confidence_features ? `\n${Object.entries(hit.confidence_features).map(([k, v]) => `${k} ${v}`).join(", ")}` : "");
  return el("li", { class: `hit${abstained ? " dim" : ""}`, tabindex: "0", role: "option", "aria-selected": "false",
                    "data-index": index, title: tip, onclick: () => openHit(index), onfocus: () => select(index, false) },
    el("h3", {}, el("span", { class: "rank" }, `${index + 1}.`),
      el("a", { href: docUrl(hit.document_id, page, hit.chunk_id), class: "hit-open",
                onclick: (event) => { event.preventDefault(); event.stopPropagation(); openHit(index); } },
        hit.title || hit.uri || hit.document_id)),
    el("p", { class: "meta" }, [page ? `page ${page}` : "no pages", hit.mime, `confidence ${confidence}`].join(" · ")),
    el("p", { class: "meta ranks" }, `ranks: ${ranks.join(" · ")}`),
    chunkText(hit));
}

function chunkText(hit) {
  const text = hit.text || "";
  const quote = hit.evidence?.quote;
  const start = quote ? evidenceOffset(hit) : -1;
  if (start < 0) return el("p", { class: "chunk-text" }, text);
  return el("p", { class: "chunk-text" }, text.slice(0, start),
    el("mark", { class: "evidence", title: "evidence passage" }, quote), text.slice(start + quote.length));
}

function evidenceOffset(hit) {
  // chunk text = "\n".join(canonical[s:e] for each span): map the evidence span into it
  const [evStart, evEnd] = hit.evidence.spans?.[0] ?? [];
  let offset = 0;
  for (const [start, end] of hit.spans || []) {
    if (evStart >= start && evEnd <= end && hit.text.slice(offset + evStart - start, offset + evEnd - start) === hit.evidence.quote) {
      return offset + evStart - start;
    }
    offset += end - start + 1;
  }
  return hit.text.indexOf(hit.evidence.quote);
}

function citedPage(cited) {
  const regions = cited.evidence?.regions?.length ? cited.evidence.regions : cited.regions || [];
  return regions[0]?.page ?? cited.pages?.[0] ?? cited.page ?? null;
}

function docUrl(documentId, page, chunkId) {
  const params = new URLSearchParams();
  if (page) params.set("page", page);
  if (chunkId) params.set("hl", chunkId);
  const query = params.toString();
  return `/ui/doc/${encodeURIComponent(documentId)}${query ? `?${query}` : ""}`;
}

function select(index, focus = true) {
  const items = $("results").children;
  if (!items.length) return;
  state.selected = Math.max(0, Math.min(index, items.length - 1));
  [...items].forEach((item, i) => item.setAttribute("aria-selected", String(i === state.selected)));
  if (focus) items[state.selected].focus();
}

function openHit(index) {
  const hit = state.hits[index];
  const cite = { label: `hit ${index + 1}`, chunk_id: hit.chunk_id, version_id: hit.version_id, regions: hit.regions,
                 spans: hit.spans, evidence: hit.evidence ?? null, others: [] };
  navigate(docUrl(hit.document_id, citedPage(hit), hit.chunk_id), { cite });
}

// -- answers -----------------------------------------------------------------------------------

async function runAnswer() {
  const panel = $("answer");
  panel.hidden = false;
  panel.replaceChildren(el("h2", {}, "Answer"), el("p", { role: "status" }, "Answering…"));
  try {
    const answer = await api("/v1/answer", { json: { query: $("q").value.trim(), filter: searchFilter() } });
    state.answer = answer;
    renderAnswer(answer);
  } catch (error) {
    panel.hidden = true;
    showError(error);
  }
}

function renderAnswer(answer) {
  const panel = $("answer");
  const body = el("p", { class: "answer-text" });
  if (answer.abstained) body.append(el("span", { class: "flag" }, "Abstained"), " ");
  for (const sentence of answer.sentences?.length ? answer.sentences : [{ text: answer.answer, supported: true }]) {
    const span = el("span", { class: `sentence${sentence.supported ? "" : " unsupported"}`,
                              title: sentence.supported ? `support ${sentence.support ?? "–"}` : `not supported: ${sentence.problem ?? ""}` });
    for (const part of sentence.text.split(/(\[\d+\])/)) {
      const marker = part.match(/^\[(\d+)\]$/);
      span.append(marker ? citeButton(Number(marker[1])) : part);
    }
    if (!sentence.supported) span.append(el("span", { class: "flag" }, `unsupported: ${PROBLEM_TEXT[sentence.problem] || "not backed by its citations"}`));
    body.append(span, " ");
  }
  const list = el("ol", { class: "citations", "aria-label": "Citations" }, (answer.citations || []).map((cite) =>
    el("li", { value: cite.n }, citeButton(cite.n), ` ${cite.title || cite.uri}`,
      citedPage(cite) ? `, page ${citedPage(cite)}` : "", `: “${cite.quote}”`)));
  panel.replaceChildren(el("h2", {}, "Answer"), body, list,
    el("p", { class: "meta" }, `verification ${answer.verification} · ${answer.generator?.backend ?? ""}`));
}

function citeButton(n) {
  const known = (state.answer?.citations || []).some((cite) => cite.n === n);
  return el("button", { type: "button", class: "cite-marker", "data-n": n, disabled: !known,
                        "aria-label": `open citation ${n}`, onclick: () => openCitation(n) }, `[${n}]`);
}

function openCitation(n) {
  const citations = state.answer.citations;
  const cite = citations.find((c) => c.n === n);
  const others = citations.filter((c) => c.n !== n && c.document_id === cite.document_id)
    .map((c) => ({ n: c.n, regions: c.regions, spans: c.spans }));
  navigate(docUrl(cite.document_id, citedPage(cite), cite.chunk_id), {
    cite: { label: `[${n}]`, chunk_id: cite.chunk_id, version_id: cite.version_id, regions: null, spans: null,
            evidence: { quote: cite.quote, spans: cite.spans, regions: cite.regions }, others },
  });
}

// -- the document view: page image with boxes, or the canonical text with the span marked ----------

async function openDocument(documentId, { page, hl, cite }) {
  clearData();
  $("doc-notice").hidden = true;
  try {
    const doc = await api(`/v1/documents/${encodeURIComponent(documentId)}`);
    state.doc = doc;
    const chunk = hl ? doc.chunks.find((c) => c.chunk_id === hl) : null;
    state.cite = cite ?? (chunk ? { label: "chunk", chunk_id: hl, regions: chunk.regions, spans: chunk.spans, others: [] } : null);
    if (state.cite && chunk && !state.cite.regions) Object.assign(state.cite, { regions: chunk.regions, spans: chunk.spans });
    renderDocumentHead(doc);
    renderSide(doc, hl);
    if (state.cite?.version_id && state.cite.version_id !== doc.active_version_id) {
      $("doc-notice").textContent = "The citation is of an older version than the active one: its place may have moved.";
      $("doc-notice").hidden = false;
    }
    if (PAGED.includes(doc.mime) && doc.n_pages) await showPageOrText(doc, page || citedPage(state.cite || {}) || 1);
    else await showText(doc);
  } catch (error) {
    showError(error);
  }
}

function renderDocumentHead(doc) {
  $("doc-title").textContent = doc.title || doc.uri || doc.document_id;
  $("doc-meta").textContent = [doc.mime, doc.collection, doc.n_pages ? `${doc.n_pages} pages` : null,
                               `${doc.n_chunks ?? doc.chunks.length} chunks`, doc.uri].filter(Boolean).join(" · ");
  const back = new URLSearchParams(sessionStorage.getItem("kb-ray.lastSearch") || "");
  $("back").href = back.get("q") ? `/ui?${back}` : "/ui";
}

async function showPage(n) {
  const doc = state.doc;
  state.page = Math.max(1, Math.min(n, doc.n_pages));
  $("page-nav").hidden = false;
  $("page-label").textContent = `Page ${state.page} of ${doc.n_pages}`;
  $("prev-page").disabled = state.page <= 1;
  $("next-page").disabled = state.page >= doc.n_pages;
  const url = new URL(location.href);
  url.searchParams.set("page", state.page);
  history.replaceState(history.state, "", url);
  const response = await api(`/v1/documents/${encodeURIComponent(doc.document_id)}/pages/${state.page}.png`, { raw: true });
  const image = $("page-image");
  const loaded = new Promise((resolve) => { image.onload = resolve; image.onerror = resolve; });
  setImage(URL.createObjectURL(await response.blob()));
  image.alt = `Page ${state.page} of ${doc.title || doc.document_id}`;
  $("page-frame").hidden = false;
  await loaded;
  drawBoxes();
}

async function showPageOrText(doc, page) {
  // a slide whose image the service cannot make (no LibreOffice there: 501, or a failed conversion:
  // 500) falls back to its text, with the reason; any other error is shown as such
  try {
    await showPage(page);
  } catch (error) {
    if (doc.mime === PDF || !(error instanceof ApiError) || ![500, 501].includes(error.status)) throw error;
    $("page-nav").hidden = true;
    await showText(doc, `No page image (${error.reason || error.status}): ${error.detail}. The slides' text is shown.`);
  }
}

function turnPage(step) {
  const doc = state.doc;
  if (!doc || !PAGED.includes(doc.mime) || $("page-nav").hidden) return;
  const page = state.page + step;
  if (page >= 1 && page <= doc.n_pages) showPage(page).catch(showError);
}

function setImage(url) {
  if (state.imageUrl) URL.revokeObjectURL(state.imageUrl);
  state.imageUrl = url;
  if (url) $("page-image").src = url; else $("page-image").removeAttribute("src");
}

function drawBoxes() {
  const cite = state.cite;
  const boxes = [];
  const onPage = (regions) => (regions || []).filter((region) => region.page === state.page);
  if (cite) {
    for (const region of onPage(cite.regions)) boxes.push(["chunk", "cited chunk", region.bbox]);
    for (const other of cite.others || []) for (const region of onPage(other.regions)) boxes.push(["citation", `[${other.n}]`, region.bbox]);
    onPage(cite.evidence?.regions).forEach((region, i) => boxes.push(["evidence", i ? "" : `${cite.label} evidence`, region.bbox]));
  }
  $("boxes").replaceChildren(...boxes.map(([kind, label, [x0, y0, x1, y1]]) => el("div", {
    class: `box ${kind}`, "data-kind": kind,
    style: { left: `${x0 * 100}%`, top: `${y0 * 100}%`, width: `${(x1 - x0) * 100}%`, height: `${(y1 - y0) * 100}%` },
  }, label ? el("span", { class: "box-label" }, label) : null)));
  renderLegend(boxes.map(([kind]) => kind));
  const target = $("boxes").querySelector(".box.evidence") || $("boxes").querySelector(".box");
  if (target) target.scrollIntoView({ block: "center" });
}

function renderLegend(kinds) {
  const names = { evidence: "evidence passage (solid)", chunk: "cited chunk (dashed)", citation: "other citations (dotted)" };
  const shown = Object.keys(names).filter((kind) => kinds.includes(kind));
  $("legend").replaceChildren(...shown.map((kind) => el("span", {}, el("span", { class: `swatch ${kind}` }), names[kind])));
  $("legend").hidden = !shown.length;
}

async function showText(doc, notice = null) {
  const view = await api(`/v1/documents/${encodeURIComponent(doc.document_id)}/text`);
  const cite = state.cite;
  const ranges = [];
  for (const [start, end] of cite?.spans || []) ranges.push({ start, end, kind: "chunk" });
  for (const [start, end] of cite?.evidence?.spans || []) ranges.push({ start, end, kind: "evidence" });
  const box = $("canonical");
  box.replaceChildren(...markedText(view.text, ranges));
  box.hidden = false;
  if (notice || (!PAGED.includes(doc.mime) && doc.n_pages)) {
    $("legend").replaceChildren(el("span", {}, notice || "Page images are rendered for PDFs and slides only: the document's text is shown."));
    $("legend").hidden = false;
  }
  const target = box.querySelector("mark.evidence") || box.querySelector("mark.chunk");
  if (target) target.scrollIntoView({ block: "center" });
}

function markedText(text, ranges) {
  // evidence spans become one <mark class="evidence"> each (its text is exactly text[start:end]);
  // chunk spans outside them become <mark class="chunk">
  const evidence = ranges.filter((r) => r.kind === "evidence").sort((a, b) => a.start - b.start);
  const chunks = ranges.filter((r) => r.kind === "chunk");
  const nodes = [];
  const plain = (start, end) => {
    const cuts = new Set([start, end]);
    for (const r of chunks) for (const cut of [r.start, r.end]) if (cut > start && cut < end) cuts.add(cut);
    const points = [...cuts].sort((a, b) => a - b);
    for (let i = 0; i + 1 < points.length; i++) {
      const [a, b] = [points[i], points[i + 1]];
      const inChunk = chunks.some((r) => r.start <= a && b <= r.end);
      nodes.push(inChunk ? el("mark", { class: "chunk", title: "cited chunk" }, text.slice(a, b)) : text.slice(a, b));
    }
  };
  let at = 0;
  for (const r of evidence) {
    if (r.start < at) continue;
    plain(at, r.start);
    nodes.push(el("mark", { class: "evidence", id: "evidence", title: "evidence passage" }, text.slice(r.start, r.end)));
    at = r.end;
  }
  plain(at, text.length);
  return nodes;
}

// -- the document's side panel: section tree, chunk inspector, versions, lineage ---------------------

function renderSide(doc, hl) {
  $("chunks").replaceChildren(...doc.chunks.map((chunk) => el("li", { class: chunk.chunk_id === hl ? "current" : null, value: chunk.ordinal + 1 },
    el("button", { type: "button", onclick: () => showChunk(chunk) },
      `${(chunk.heading_path || []).slice(-1)[0] || "(no heading)"}`),
    el("div", { class: "meta" }, `${chunk.pages.length ? `p. ${chunk.pages.join(", ")} · ` : ""}spans ${chunk.spans.map(([s, e]) => `${s}–${e}`).join(", ")} · ${chunk.token_count} tokens`),
    el("div", {}, chunk.text.length > 160 ? `${chunk.text.slice(0, 160)}…` : chunk.text))));
  $("sections").replaceChildren(...sectionTree(doc.chunks));
  loadVersions(doc);
  loadLineage(hl || doc.chunks[0]?.chunk_id);
}

function sectionTree(chunks) {
  const root = { children: new Map(), chunk: null };
  for (const chunk of chunks) {
    let node = root;
    for (const heading of chunk.heading_path || []) {
      if (!node.children.has(heading)) node.children.set(heading, { children: new Map(), chunk });
      node = node.children.get(heading);
    }
  }
  const render = (node) => [...node.children].map(([heading, child]) => el("li", {},
    el("button", { type: "button", onclick: () => showChunk(child.chunk) }, heading),
    child.children.size ? el("ul", {}, render(child)) : null));
  return render(root);
}

function showChunk(chunk) {
  const cite = { label: "chunk", chunk_id: chunk.chunk_id, regions: chunk.regions, spans: chunk.spans, evidence: null, others: [] };
  navigate(docUrl(state.doc.document_id, chunk.pages[0], chunk.chunk_id), { cite });
}

async function loadVersions(doc) {
  try {
    const { versions } = await api(`/v1/documents/${encodeURIComponent(doc.document_id)}/versions`);
    $("versions").replaceChildren(el("tr", {}, el("th", {}, "version"), el("th", {}, "created"), el("th", {}, "status")),
      ...versions.map((v) => el("tr", {}, el("td", { title: v.version_id }, v.version_id.slice(0, 12)),
        el("td", {}, (v.created_at || "").slice(0, 19)), el("td", {}, v.active ? `${v.status} (active)` : v.status))));
  } catch (error) { showError(error); }
}

async function loadLineage(chunkId) {
  if (!chunkId) return;
  try {
    const view = await api(`/v1/chunks/${encodeURIComponent(chunkId)}`);
    const rows = Object.entries(view.lineage || {}).filter(([, value]) => typeof value !== "object");
    $("lineage").replaceChildren(el("dt", {}, "chunk"), el("dd", {}, chunkId),
      ...rows.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value ?? "–")]));
  } catch (error) { showError(error); }
}

// -- wiring --------------------------------------------------------------------------------------

async function loadModes() {
  try {
    const spec = await (await fetch("/openapi.json")).json();
    return spec.components.schemas.SearchRequest.properties.mode.enum || FALLBACK_MODES;
  } catch { return FALLBACK_MODES; }
}

function submitSearch(withAnswer) {
  if (!$("q").value.trim()) { $("q").focus(); return; }
  const params = formParams(withAnswer);
  sessionStorage.setItem("kb-ray.lastSearch", params.toString());
  navigate(`/ui?${params}`);
}

function onKey(event) {
  if ($("search-view").hidden) {
    const typing = ["INPUT", "SELECT", "TEXTAREA"].includes(document.activeElement?.tagName);
    if (!typing && event.key === "ArrowRight") turnPage(1);
    if (!typing && event.key === "ArrowLeft") turnPage(-1);
    return;
  }
  const inResults = $("results").contains(document.activeElement);
  if (!inResults && document.activeElement !== $("q")) return;
  if (event.key === "ArrowDown") { event.preventDefault(); select(inResults ? state.selected + 1 : 0); }
  else if (event.key === "ArrowUp" && inResults) {
    event.preventDefault();
    if (state.selected === 0) $("q").focus(); else select(state.selected - 1);
  } else if (event.key === "Enter" && inResults) { event.preventDefault(); openHit(state.selected); }
}

async function start() {
  $("key-state").textContent = apiKey() ? "key in use (this tab only)" : "";
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem(KEY_STORE, $("key-input").value.trim());
    $("key-input").value = "";
    $("key-state").textContent = "key in use (this tab only)";
    route();
  });
  $("key-forget").addEventListener("click", () => {
    sessionStorage.removeItem(KEY_STORE);
    $("key-state").textContent = "no key";
    clearData();
  });
  $("search-form").addEventListener("submit", (event) => { event.preventDefault(); submitSearch(false); });
  $("answer-button").addEventListener("click", () => submitSearch(true));
  $("prev-page").addEventListener("click", () => turnPage(-1));
  $("next-page").addEventListener("click", () => turnPage(1));
  $("back").addEventListener("click", (event) => { event.preventDefault(); navigate(event.currentTarget.href); });
  document.addEventListener("keydown", onKey);
  window.addEventListener("popstate", route);
  const modes = await loadModes();
  $("mode").replaceChildren(...modes.map((mode) => el("option", { value: mode }, mode)));
  route();
  document.body.dataset.ready = "1";
}

start();
