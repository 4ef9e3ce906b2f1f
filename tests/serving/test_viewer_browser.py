"""The browser viewer (/ui, docs/viewer.md) in headless Chromium, driven by Selenium through
Debian's chromedriver, against real Ray Serve on 127.0.0.1 with API keys on.

Every expectation is computed independently of the page's script: the test asks the API itself
(``/v1/search``, ``/v1/answer``) and the catalog (the canonical text) and compares with what the
browser shows, measured from the DOM (the drawn box's pixel rectangle against the image's).
A private copy of the golden catalog gets an index and one service for the module; the set-up
(index build, Serve start) takes about a minute on the 2-core box, so the module is slow-marked
(``make test-cluster`` runs it in CI, where .ci/run installs chromium and chromium-driver).

Answers come from the ``openai`` generator over a scripted OpenAI-compatible server
(tests/enrich/openai_server.py): each answer test scripts the reply it needs (a cited sentence
quoting the passage the prompt numbered, or a claim the verifier must flag). PPTX slides are
rendered through LibreOffice (kb_ray/pages/slides.py); their test is skipped without ``soffice``.

``KB_RAY_SCREENSHOTS=docs/images`` also saves a 1280×800 screenshot of each view (the README's).
"""

from __future__ import annotations

import io
import os
import re
import shutil
import time
from pathlib import Path
from urllib.parse import parse_qs, quote, urlencode, urlparse

import httpx
import pyarrow as pa
import pytest
from PIL import Image

from kb_ray.auth.keys import ApiKeyStore
from kb_ray.catalog.delta import DeltaCatalog
from kb_ray.config import AuthSettings
from kb_ray.index import build_index
from kb_ray.serving.app import start_service, stop_service
from tests.enrich.openai_server import serve_openai
from tests.index_fixtures import copy_kb, golden_config

pytestmark = pytest.mark.slow
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install kb-ray[test])")
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
if not (CHROMIUM and CHROMEDRIVER):
    pytest.skip("the browser tests need Debian's chromium and chromium-driver (apt-get install -y chromium "
                "chromium-driver; .ci/run installs them)", allow_module_level=True)

PORT = 8785
URL = f"http://127.0.0.1:{PORT}"
WAIT_S = 90
BOX_TOLERANCE = 0.02  # of the page's width and height
PDF_QUERY = "mechanical seal kit part number for the AquaFlow pump"
ANSWER_QUERY = "How many eelgrass shoots were transplanted in Halvik Bay?"
ABSTAIN_QUERY = "Who won the 1998 football world cup?"
PPTX = "application/vnd.openxmlformats-officedocument.presentationml.presentation"
PPTX_QUERY = "Helios BMS field failure rate"
TEXT_CASES = {  # a non-paginated format -> a query whose first hit is in it
    "text/html": "CycleLink day pass price",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "core hours remote employees must be available",
    "text/markdown": "Orchard error E1042 snapshot signature mismatch",
}
MODEL = "kb-ray/test-llm"
TAGS = {"manual.pdf": ["pumps"], "slides.pptx": ["roadmap"]}  # set on the copy before its index is built
SHOTS = os.environ.get("KB_RAY_SCREENSHOTS")


@pytest.fixture(scope="module")
def llm():
    with serve_openai(model=MODEL) as server:
        yield server


@pytest.fixture(scope="module")
def service(golden_kb, tmp_path_factory, llm):
    kb_root = copy_kb(golden_kb, tmp_path_factory.mktemp("viewer") / "kb")
    tag_documents(DeltaCatalog.open(kb_root, create=False), TAGS)
    config = golden_config(kb_root, "embedding.num_threads=1", "search.evidence=lexical", "answer.generator=openai",
                           f"answer.endpoint={llm.base_url}", f"answer.model_id={MODEL}", "answer.repair_rounds=0")
    build_index(config)
    config.serve.auth = AuthSettings(enabled=True, tenants={"acme": ["default"]}, cache_ttl_s=0.2)
    store = ApiKeyStore(DeltaCatalog.open(kb_root, create=False))
    key = store.create(tenant="acme", role="reader")[0]
    start_service(config, port=PORT)
    yield {"key": key, "catalog": DeltaCatalog.open(kb_root, create=False), "llm": llm}
    stop_service()


def tag_documents(catalog, tags: dict[str, list[str]]) -> None:
    rows = [{**row, "tags": tags[row["uri"].rsplit("/", 1)[-1]]} for row in catalog.read("documents").to_pylist()
            if row["uri"].rsplit("/", 1)[-1] in tags]
    catalog.merge_upsert("documents", pa.Table.from_pylist(rows, schema=catalog.read("documents").schema),
                         keys=["document_id"])


@pytest.fixture(scope="module")
def browser(service):
    driver = chrome()
    use_key(driver, service["key"])
    yield driver
    driver.quit()


def chrome():
    """Headless Chromium at 1280×800 through Debian's chromedriver."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--hide-scrollbars", "--force-device-scale-factor=1"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=webdriver.ChromeService(executable_path=CHROMEDRIVER), options=options)
    set_viewport(driver, 1280, 800)
    return driver


def set_viewport(driver, width: int, height: int) -> None:
    """The page's own viewport (window.innerWidth/innerHeight), whatever the window around it."""
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})


def open_page(driver, url: str) -> None:
    """Load a viewer address and wait until its script is wired (it marks ``body[data-ready]``)."""
    driver.get(url)
    wait_for(driver, lambda d: d.execute_script("return document.body.dataset.ready === '1'"))


def use_key(driver, key: str) -> None:
    open_page(driver, f"{URL}/ui")
    field = driver.find_element(By.ID, "key-input")
    field.clear()
    field.send_keys(key, Keys.ENTER)
    wait_for(driver, lambda d: "key in use" in d.find_element(By.ID, "key-state").text)


def wait_for(driver, condition, timeout: float = WAIT_S):
    return WebDriverWait(driver, timeout).until(condition)


def api(service, path: str, body: dict | None = None) -> dict:
    headers = {"Authorization": f"Bearer {service['key']}"}
    response = (httpx.post(f"{URL}{path}", json=body, headers=headers, timeout=120) if body is not None
                else httpx.get(f"{URL}{path}", headers=headers, timeout=120))
    assert response.status_code == 200, response.text
    return response.json()


def search(service, query: str, **filters) -> dict:
    return api(service, "/v1/search", {"query": query, "k": 10, "mode": "hybrid", "filter": filters or None})


def shot(driver, name: str) -> None:
    """With KB_RAY_SCREENSHOTS: the viewport as a small (256-colour) PNG for the README."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        time.sleep(0.3)
        image = Image.open(io.BytesIO(driver.get_screenshot_as_png())).convert("RGB")
        image.quantize(colors=256).save(Path(SHOTS) / f"viewer-{name}.png", optimize=True)


def drawn_boxes(driver, kind: str) -> list[dict]:
    """The drawn boxes of ``kind`` as fractions of the displayed page image, measured in the DOM."""
    return driver.execute_script("""
        const image = document.getElementById('page-image').getBoundingClientRect();
        return [...document.querySelectorAll('#boxes .box[data-kind="' + arguments[0] + '"]')].map((box) => {
            const r = box.getBoundingClientRect();
            return {x0: (r.left - image.left) / image.width, y0: (r.top - image.top) / image.height,
                    x1: (r.right - image.left) / image.width, y1: (r.bottom - image.top) / image.height};
        });""", kind)


def page_loaded(driver) -> bool:
    return driver.execute_script("const i = document.getElementById('page-image');"
                                 "return !!i.src && i.complete && i.naturalWidth > 0 && !i.closest('[hidden]');")


def assert_boxes_match(drawn: list[dict], regions: list[dict], page: int) -> None:
    expected = sorted(tuple(region["bbox"]) for region in regions if region["page"] == page)
    measured = sorted((box["x0"], box["y0"], box["x1"], box["y1"]) for box in drawn)
    assert len(measured) == len(expected) and expected, (measured, expected)
    for got, want in zip(measured, expected):
        assert all(abs(g - w) <= BOX_TOLERANCE for g, w in zip(got, want)), (got, want)


def canonical_text(service, version_id: str) -> str:
    rows = service["catalog"].read("versions", columns=["version_id", "canonical_text"]).to_pylist()
    return next(row["canonical_text"] for row in rows if row["version_id"] == version_id)


def test_search_shows_the_first_hits_evidence_inside_its_chunk(service, browser):
    expected = search(service, PDF_QUERY)["hits"][0]
    browser.get(f"{URL}/ui?{urlencode({'q': PDF_QUERY, 'mode': 'hybrid'})}")
    first = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#results li:first-child mark.evidence"))
    item = browser.find_element(By.CSS_SELECTOR, "#results li:first-child")
    assert first.get_attribute("textContent") == expected["evidence"]["quote"]
    assert expected["title"] in item.text and f"page {expected['evidence']['regions'][0]['page']}" in item.text
    hover = item.get_attribute("title")  # per-retriever ranks and confidence on hover
    assert all(f"{name} {rank}" in hover for name, rank in expected["ranks"].items() if rank is not None)
    assert f"confidence {expected['confidence']:.2f}" in hover
    shot(browser, "search")


def test_clicking_a_pdf_hit_draws_the_evidence_box_at_the_citations_place(service, browser):
    hit = search(service, PDF_QUERY)["hits"][0]
    page = hit["evidence"]["regions"][0]["page"]
    browser.get(f"{URL}/ui?{urlencode({'q': PDF_QUERY})}")
    wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#results li:first-child a.hit-open")).click()
    wait_for(browser, page_loaded)
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#boxes .box.evidence"))
    address = urlparse(browser.current_url)
    assert address.path == f"/ui/doc/{hit['document_id']}"
    assert parse_qs(address.query) == {"page": [str(page)], "hl": [hit["chunk_id"]]}
    assert browser.find_element(By.ID, "page-label").text.startswith(f"Page {page} of ")
    png = httpx.get(f"{URL}/v1/documents/{hit['document_id']}/pages/{page}.png",
                    headers={"Authorization": f"Bearer {service['key']}"}, timeout=60)
    natural = browser.execute_script("const i = document.getElementById('page-image'); return [i.naturalWidth, i.naturalHeight];")
    assert tuple(natural) == Image.open(io.BytesIO(png.content)).size  # the page image of the route
    assert_boxes_match(drawn_boxes(browser, "evidence"), hit["evidence"]["regions"], page)
    assert_boxes_match(drawn_boxes(browser, "chunk"), hit["regions"], page)  # every region of the cited chunk
    shot(browser, "page")


@pytest.mark.skipif(shutil.which("soffice") is None, reason="PPTX page images need LibreOffice (soffice): make office-deps")
def test_clicking_a_pptx_hit_draws_the_evidence_box_on_the_slide_image(service, browser):
    hit = search(service, PPTX_QUERY, mime=[PPTX])["hits"][0]
    page = hit["evidence"]["regions"][0]["page"]
    browser.get(f"{URL}/ui?{urlencode({'q': PPTX_QUERY, 'mime': PPTX})}")
    wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#results li:first-child a.hit-open")).click()
    wait_for(browser, page_loaded)
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#boxes .box.evidence"))
    assert urlparse(browser.current_url).path == f"/ui/doc/{hit['document_id']}"
    view = api(service, f"/v1/documents/{hit['document_id']}")
    assert browser.find_element(By.ID, "page-label").text == f"Page {page} of {view['n_pages']}"
    assert not browser.find_element(By.ID, "canonical").is_displayed()  # the slide image, not its text
    png = httpx.get(f"{URL}/v1/documents/{hit['document_id']}/pages/{page}.png",
                    headers={"Authorization": f"Bearer {service['key']}"}, timeout=120)
    natural = browser.execute_script("const i = document.getElementById('page-image'); return [i.naturalWidth, i.naturalHeight];")
    assert tuple(natural) == Image.open(io.BytesIO(png.content)).size and abs(natural[0] / natural[1] - 4 / 3) < 0.01
    assert_boxes_match(drawn_boxes(browser, "evidence"), hit["evidence"]["regions"], page)
    assert_boxes_match(drawn_boxes(browser, "chunk"), hit["regions"], page)
    shot(browser, "slide")


def test_a_slide_the_service_cannot_render_falls_back_to_its_text(service, browser):
    """Without LibreOffice the route answers 501 ``no_renderer`` (tests/search/test_page_images.py):
    the page's own fetch is made to answer that for page images, and the viewer shows the text."""
    hit = search(service, PPTX_QUERY, mime=[PPTX])["hits"][0]
    browser.get(f"{URL}/ui?{urlencode({'q': PPTX_QUERY, 'mime': PPTX})}")
    link = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#results li:first-child a.hit-open"))
    browser.execute_script("""
        const fetchForReal = window.fetch;
        window.fetch = (url, init) => String(url).includes('/pages/')
          ? Promise.resolve(new Response(JSON.stringify({detail: 'slide conversion failed (no_renderer): soffice is missing'}),
              {status: 501, headers: {'Content-Type': 'application/json', 'X-Kb-Ray-Reason': 'no_renderer'}}))
          : fetchForReal(url, init);""")
    link.click()  # the viewer navigates in the page (history.pushState): the patched fetch stays
    mark = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#canonical mark.evidence"))
    assert mark.get_attribute("textContent") == hit["evidence"]["quote"]
    legend = browser.find_element(By.ID, "legend").text
    assert legend.startswith("No page image (no_renderer): slide conversion failed") and "text is shown" in legend
    assert not browser.find_element(By.ID, "page-frame").is_displayed()
    assert not browser.find_element(By.ID, "page-nav").is_displayed()
    assert not browser.find_element(By.ID, "error").is_displayed()


@pytest.mark.parametrize("mime", list(TEXT_CASES))
def test_a_text_citation_scrolls_to_a_highlighted_span_equal_to_the_quote(service, browser, mime):
    query = TEXT_CASES[mime]
    hit = search(service, query, mime=[mime])["hits"][0]
    [(start, end)] = hit["evidence"]["spans"]
    assert canonical_text(service, hit["version_id"])[start:end] == hit["evidence"]["quote"]
    browser.get(f"{URL}/ui?{urlencode({'q': query, 'mime': mime})}")
    wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#results li:first-child a.hit-open")).click()
    mark = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#canonical mark.evidence"))
    assert urlparse(browser.current_url).path == f"/ui/doc/{hit['document_id']}"
    assert mark.get_attribute("textContent") == hit["evidence"]["quote"]
    assert len(browser.find_elements(By.CSS_SELECTOR, "#canonical mark.evidence")) == 1
    inside = browser.execute_script("""
        const mark = arguments[0].getBoundingClientRect(), pane = document.getElementById('canonical').getBoundingClientRect();
        return mark.top >= pane.top - 1 && mark.bottom <= pane.bottom + 1 && mark.top >= 0 && mark.top < window.innerHeight;""",
                                    mark)
    assert inside, "the highlighted span is not scrolled into view"
    if mime == "text/html":
        shot(browser, "text")


def scripted_answer(service, query: str, reply: str) -> dict:
    """``/v1/answer`` of ``query`` with the generator replying ``reply`` to this call and to the
    browser's next one (the same prompt: the same search)."""
    service["llm"].set(chat_replies=[reply, reply])
    return api(service, "/v1/answer", {"query": query})


def cited_reply(service, query: str, fact: str) -> str:
    """A reply citing, with its number in the prompt, the given passage that contains ``fact``:
    one probe answer shows how the service numbers the passages."""
    service["llm"].set(chat_replies=["Probe [1]."])
    api(service, "/v1/answer", {"query": query})
    prompt = service["llm"].chat_requests()[-1]["messages"][-1]["content"]
    number, quote = next((m[1], m[2]) for m in re.finditer(r"^\[(\d+)\] .*?, pages? [\d-]+: (.*)$", prompt, re.M) if fact in m[2])
    sentence = next(s for s in re.split(r"(?<=\.)\s+", quote) if fact in s)
    return f"{sentence.rstrip('.')} [{number}]."


def test_an_answers_marker_opens_the_cited_page(service, browser):
    answer = scripted_answer(service, ANSWER_QUERY, cited_reply(service, ANSWER_QUERY, "38,400"))
    assert answer["verification"] == "ok" and answer["sentences"][0]["supported"], answer
    browser.get(f"{URL}/ui?{urlencode({'q': ANSWER_QUERY, 'answer': '1'})}")
    marker = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#answer .answer-text .cite-marker"))
    cited = next(c for c in answer["citations"] if c["n"] == int(marker.get_attribute("data-n")))
    assert browser.find_element(By.CSS_SELECTOR, "#answer .answer-text").text.startswith(answer["sentences"][0]["text"][:40])
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#results li"))
    shot(browser, "answer")
    marker.click()
    wait_for(browser, page_loaded)
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#boxes .box.evidence"))
    page = cited["regions"][0]["page"]
    assert urlparse(browser.current_url).path == f"/ui/doc/{cited['document_id']}"
    assert browser.find_element(By.ID, "page-label").text.startswith(f"Page {page} of ")
    assert_boxes_match(drawn_boxes(browser, "evidence"), cited["regions"], page)


def test_deep_links_open_the_page_with_the_chunk_and_run_the_search(service, browser):
    document = next(d for d in api(service, "/v1/documents")["documents"] if d["uri"].endswith("manual.pdf"))
    view = api(service, f"/v1/documents/{document['document_id']}")
    chunk = next(c for c in view["chunks"] if 2 in c["pages"] and c["regions"])
    browser.get(f"{URL}/ui/doc/{quote(document['document_id'])}?page=2&hl={chunk['chunk_id']}")
    wait_for(browser, page_loaded)
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#boxes .box.chunk"))
    assert browser.find_element(By.ID, "page-label").text == f"Page 2 of {view['n_pages']}"
    assert_boxes_match(drawn_boxes(browser, "chunk"), chunk["regions"], 2)
    assert browser.find_element(By.CSS_SELECTOR, "#chunks li.current").text.startswith(chunk["heading_path"][-1])
    wait_for(browser, lambda d: chunk["chunk_id"] in d.find_element(By.ID, "lineage").text)
    shot(browser, "document")
    browser.find_element(By.ID, "next-page").click()
    wait_for(browser, lambda d: d.find_element(By.ID, "page-label").text == f"Page 3 of {view['n_pages']}")
    assert parse_qs(urlparse(browser.current_url).query)["page"] == ["3"]
    browser.get(f"{URL}/ui?{urlencode({'q': PDF_QUERY, 'mode': 'lexical'})}")
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#results li"))
    assert browser.find_element(By.ID, "mode").get_attribute("value") == "lexical"
    assert "lexical" in browser.find_element(By.ID, "search-status").text
    modes = [o.get_attribute("value") for o in browser.find_elements(By.CSS_SELECTOR, "#mode option")]
    assert modes == ["hybrid", "dense", "lexical", "page", "hybrid+page", "tree", "graph"]  # the service's own list (OpenAPI)


def test_keyboard_enter_searches_and_arrows_move_between_hits(service, browser):
    hits = search(service, PDF_QUERY)["hits"]
    open_page(browser, f"{URL}/ui")
    box = wait_for(browser, lambda d: d.find_element(By.ID, "q"))
    box.send_keys(PDF_QUERY, Keys.ENTER)
    wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results li")) == len(hits))
    box.send_keys(Keys.ARROW_DOWN)
    active = browser.switch_to.active_element
    assert active.get_attribute("data-index") == "0" and active.get_attribute("aria-selected") == "true"
    for key, index in ((Keys.ARROW_DOWN, "1"), (Keys.ARROW_DOWN, "2"), (Keys.ARROW_UP, "1")):
        browser.switch_to.active_element.send_keys(key)
        assert browser.switch_to.active_element.get_attribute("data-index") == index, key
    selected = browser.find_elements(By.CSS_SELECTOR, "#results li[aria-selected='true']")
    assert [item.get_attribute("data-index") for item in selected] == ["1"]
    browser.switch_to.active_element.send_keys(Keys.ARROW_UP)
    browser.switch_to.active_element.send_keys(Keys.ARROW_UP)
    assert browser.switch_to.active_element.get_attribute("id") == "q"  # ↑ from the first hit: the query box
    box.send_keys(Keys.ARROW_DOWN)
    browser.switch_to.active_element.send_keys(Keys.ARROW_DOWN)
    browser.switch_to.active_element.send_keys(Keys.ENTER)
    wait_for(browser, lambda d: urlparse(d.current_url).path == f"/ui/doc/{hits[1]['document_id']}")
    assert parse_qs(urlparse(browser.current_url).query)["hl"] == [hits[1]["chunk_id"]]


def test_a_narrow_window_stacks_the_panels(service, browser):
    try:
        set_viewport(browser, 600, 900)
        hit = search(service, PDF_QUERY)["hits"][0]
        browser.get(f"{URL}/ui/doc/{hit['document_id']}?page=1")
        wait_for(browser, page_loaded)
        pane = browser.find_element(By.ID, "viewer-pane").rect
        side = browser.find_element(By.ID, "doc-side").rect
        assert browser.execute_script("return window.innerWidth") == 600
        assert side["y"] >= pane["y"] + pane["height"] - 1  # below, not beside
        width = browser.execute_script("return document.documentElement.scrollWidth")
        assert width <= 600  # nothing wider than the window
    finally:
        set_viewport(browser, 1280, 800)


def test_a_wrong_key_shows_an_error_and_no_data(service, browser):
    try:
        use_key(browser, "kb_wrong_key")
        browser.get(f"{URL}/ui?{urlencode({'q': PDF_QUERY, 'answer': '1'})}")
        error = wait_for(browser, lambda d: d.find_element(By.ID, "error") if d.find_element(By.ID, "error").is_displayed()
                         else None)
        assert "401" in error.text and "API key" in error.text
        time.sleep(1)  # the answer request fails too: still no data
        assert browser.find_elements(By.CSS_SELECTOR, "#results li") == []
        assert not browser.find_element(By.ID, "answer").is_displayed()
        shot(browser, "wrong-key")
        hit = search(service, PDF_QUERY)["hits"][0]
        browser.get(f"{URL}/ui/doc/{hit['document_id']}?page=1")
        wait_for(browser, lambda d: d.find_element(By.ID, "error").is_displayed())
        assert browser.find_element(By.ID, "doc-title").text == ""
        assert not page_loaded(browser) and browser.find_elements(By.CSS_SELECTOR, "#chunks li") == []
    finally:
        use_key(browser, service["key"])


def displayed_ink(driver) -> list[int]:
    """[width, height, dark pixels per tenth of the height] of the displayed page image, decoded by
    the browser (drawn on a canvas at its natural size): a fingerprint of which page it shows."""
    return driver.execute_script("""
        const image = document.getElementById('page-image');
        const canvas = document.createElement('canvas');
        [canvas.width, canvas.height] = [image.naturalWidth, image.naturalHeight];
        const context = canvas.getContext('2d');
        context.drawImage(image, 0, 0);
        const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
        const bands = new Array(10).fill(0);
        for (let i = 0; i < data.length; i += 4) {
          if (data[i] + data[i + 1] + data[i + 2] < 384) bands[Math.floor(Math.floor(i / 4 / canvas.width) * 10 / canvas.height)]++;
        }
        return [canvas.width, canvas.height, ...bands];""")


def route_ink(service, document_id: str, page: int) -> list[int]:
    """:func:`displayed_ink` of the route's PNG of that page, decoded here."""
    response = httpx.get(f"{URL}/v1/documents/{document_id}/pages/{page}.png",
                         headers={"Authorization": f"Bearer {service['key']}"}, timeout=120)
    assert response.status_code == 200, response.text
    image = Image.open(io.BytesIO(response.content)).convert("RGB")
    width, height = image.size
    bands = [0] * 10
    for index, (r, g, b) in enumerate(image.getdata()):
        if r + g + b < 384:
            bands[(index // width) * 10 // height] += 1
    return [width, height, *bands]


def same_page(displayed: list[int], expected: list[int]) -> bool:
    return displayed[:2] == expected[:2] and all(abs(a - b) <= max(20, b // 50) for a, b in zip(displayed[2:], expected[2:]))


def document_named(service, name: str) -> dict:
    return next(d for d in api(service, "/v1/documents")["documents"] if d["uri"].endswith(name))


def test_an_unsupported_sentence_is_marked_with_its_problem(service, browser):
    reply = "Halvik Bay was replanted by 99 purple submarines in 1887 [1]."
    answer = scripted_answer(service, ANSWER_QUERY, reply)
    [sentence] = answer["sentences"]
    assert not sentence["supported"] and sentence["problem"] == "unsupported" and answer["verification"] == "flagged"
    browser.get(f"{URL}/ui?{urlencode({'q': ANSWER_QUERY, 'answer': '1'})}")
    marked = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#answer .answer-text .sentence.unsupported"))
    assert marked.text.startswith("Halvik Bay was replanted by 99 purple submarines")
    assert marked.find_element(By.CSS_SELECTOR, ".flag").text == "unsupported: its citations do not back it"
    assert browser.find_elements(By.CSS_SELECTOR, "#answer .sentence:not(.unsupported)") == []
    style = browser.execute_script("return getComputedStyle(arguments[0]).textDecorationLine", marked)
    assert "underline" in style  # visibly marked, not only labelled
    assert "verification flagged" in browser.find_element(By.ID, "answer").text


def test_a_question_the_kb_cannot_answer_shows_the_abstain_banner(service, browser):
    result = search(service, ABSTAIN_QUERY)
    assert result["abstain"]
    answer = api(service, "/v1/answer", {"query": ABSTAIN_QUERY})  # the search abstains: no generator call
    assert answer["abstained"] and answer["verification"] == "refused"
    browser.get(f"{URL}/ui?{urlencode({'q': ABSTAIN_QUERY, 'answer': '1'})}")
    banner = wait_for(browser, lambda d: d.find_element(By.ID, "abstain") if d.find_element(By.ID, "abstain").is_displayed()
                      else None)
    best = max((hit["confidence"] or 0) for hit in result["hits"])
    assert banner.text.startswith("no hit is confident enough") and f"best confidence {best:.2f}" in banner.text
    hits = browser.find_elements(By.CSS_SELECTOR, "#results li")
    assert len(hits) == len(result["hits"]) and all("dim" in hit.get_attribute("class").split() for hit in hits)
    text = wait_for(browser, lambda d: d.find_element(By.CSS_SELECTOR, "#answer .answer-text"))
    assert text.text == f"Abstained {answer['answer']}"


def test_arrow_keys_turn_the_pages_of_a_pdf(service, browser):
    document = api(service, f"/v1/documents/{document_named(service, 'manual.pdf')['document_id']}")
    open_page(browser, f"{URL}/ui/doc/{quote(document['document_id'])}?page=1")
    wait_for(browser, page_loaded)
    label = browser.find_element(By.ID, "page-label")
    assert label.text == f"Page 1 of {document['n_pages']}" and document["n_pages"] >= 2
    first, second = (route_ink(service, document["document_id"], page) for page in (1, 2))
    assert not same_page(first, second)  # the fingerprint tells the two pages apart
    assert same_page(displayed_ink(browser), first)
    ActionChains(browser).send_keys(Keys.ARROW_RIGHT).perform()
    wait_for(browser, lambda d: label.text == f"Page 2 of {document['n_pages']}" and page_loaded(d))
    wait_for(browser, lambda d: same_page(displayed_ink(d), second))
    assert parse_qs(urlparse(browser.current_url).query)["page"] == ["2"]
    ActionChains(browser).send_keys(Keys.ARROW_LEFT).perform()
    wait_for(browser, lambda d: label.text == f"Page 1 of {document['n_pages']}")
    wait_for(browser, lambda d: same_page(displayed_ink(d), first))
    ActionChains(browser).send_keys(Keys.ARROW_LEFT).perform()  # no page 0
    time.sleep(0.5)
    assert label.text == f"Page 1 of {document['n_pages']}"


def test_a_heading_in_the_section_tree_opens_its_first_chunk(service, browser):
    document = document_named(service, "manual.pdf")
    view = api(service, f"/v1/documents/{document['document_id']}")
    first_of = {}  # heading path -> the first chunk under it, as the tree builds it
    for chunk in view["chunks"]:
        path = tuple(chunk["heading_path"] or ())
        for depth in range(1, len(path) + 1):
            first_of.setdefault(path[:depth], chunk)
    path, chunk = next((p, c) for p, c in reversed(first_of.items()) if c["regions"] and c["pages"] and c["pages"][0] > 1)
    open_page(browser, f"{URL}/ui/doc/{quote(document['document_id'])}?page=1")
    wait_for(browser, page_loaded)
    [button] = [b for b in browser.find_elements(By.CSS_SELECTOR, "#sections button") if b.text == path[-1]]
    button.click()
    wait_for(browser, lambda d: parse_qs(urlparse(d.current_url).query).get("hl") == [chunk["chunk_id"]])
    wait_for(browser, lambda d: d.find_element(By.ID, "page-label").text.startswith(f"Page {chunk['pages'][0]} of "))
    wait_for(browser, page_loaded)
    wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#boxes .box.chunk"))
    assert_boxes_match(drawn_boxes(browser, "chunk"), chunk["regions"], chunk["pages"][0])
    current = browser.find_element(By.CSS_SELECTOR, "#chunks li.current")
    assert current.text.startswith(chunk["heading_path"][-1]) and current.get_attribute("value") == str(chunk["ordinal"] + 1)
    wait_for(browser, lambda d: chunk["chunk_id"] in d.find_element(By.ID, "lineage").text)


def test_the_versions_table_lists_the_documents_versions(service, browser):
    document = document_named(service, "policy.docx")
    versions = api(service, f"/v1/documents/{document['document_id']}/versions")["versions"]
    open_page(browser, f"{URL}/ui/doc/{quote(document['document_id'])}")
    wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#versions tr")) == len(versions) + 1)
    rows = [[cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
            for row in browser.find_elements(By.CSS_SELECTOR, "#versions tr")[1:]]
    assert [row[0] for row in rows] == [v["version_id"][:12] for v in versions] and versions
    assert [row[2].endswith("(active)") for row in rows] == [bool(v["active"]) for v in versions]
    assert any(v["version_id"] == document["active_version_id"] and v["active"] for v in versions)


def test_a_tags_filter_narrows_the_hits(service, browser):
    query = "maximum discharge pressure and firmware release plan"
    everything = search(service, query)["hits"]
    tagged = search(service, query, tags_any=["pumps"])["hits"]
    manual = document_named(service, "manual.pdf")["document_id"]
    assert {hit["document_id"] for hit in everything} - {manual}, "the unfiltered hits must include other documents"
    assert tagged and {hit["document_id"] for hit in tagged} == {manual}
    browser.get(f"{URL}/ui?{urlencode({'q': query})}")
    wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results li")) == len(everything))
    tags = browser.find_element(By.ID, "f-tags")
    tags.send_keys("pumps")
    browser.find_element(By.ID, "search-button").click()
    wait_for(browser, lambda d: parse_qs(urlparse(d.current_url).query).get("tags") == ["pumps"])
    wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results li")) == len(tagged))
    titles = [item.find_element(By.CSS_SELECTOR, "a.hit-open").text for item in browser.find_elements(By.CSS_SELECTOR, "#results li")]
    assert titles == [hit["title"] or hit["uri"] for hit in tagged]
    browser.get(f"{URL}/ui?{urlencode({'q': query, 'collection': 'no-such-collection'})}")
    wait_for(browser, lambda d: "0 hits" in d.find_element(By.ID, "search-status").text)
    assert browser.find_elements(By.CSS_SELECTOR, "#results li") == []


def test_a_narrow_window_stacks_the_search_into_one_column_with_its_hits(service, browser):
    service["llm"].set(chat_replies=["Halvik Bay was replanted by 99 purple submarines in 1887 [1]."])
    hits = search(service, ANSWER_QUERY)["hits"]
    try:
        set_viewport(browser, 600, 900)
        browser.get(f"{URL}/ui?{urlencode({'q': ANSWER_QUERY, 'answer': '1'})}")
        wait_for(browser, lambda d: len(d.find_elements(By.CSS_SELECTOR, "#results li")) == len(hits))
        wait_for(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#answer .answer-text"))
        items = [item.rect for item in browser.find_elements(By.CSS_SELECTOR, "#results li")]
        answer = browser.find_element(By.ID, "answer").rect
        column = browser.find_element(By.CSS_SELECTOR, ".results-column").rect
        assert all(r["x"] >= 0 and r["x"] + r["width"] <= 600 and r["width"] > 300 for r in items + [answer])
        assert all(b["y"] >= a["y"] + a["height"] - 1 for a, b in zip(items, items[1:]))  # one under another
        assert answer["y"] >= column["y"] + column["height"] - 1 and abs(answer["x"] - column["x"]) <= 1  # below
        assert items[0]["y"] < 900  # the first hit is in the first screen
        assert browser.execute_script("return document.documentElement.scrollWidth") <= 600
    finally:
        set_viewport(browser, 1280, 800)
