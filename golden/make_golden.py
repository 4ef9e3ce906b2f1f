"""Generate the golden source documents used by parser, chunker and retrieval tests.

Every document is built from the text in this file, with fixed metadata and
timestamps, so a rerun reproduces the committed files byte for byte:

    .venv/bin/python golden/make_golden.py            # writes golden/sources/
    .venv/bin/python golden/make_golden.py --out DIR  # writes elsewhere

All names, companies, part numbers and figures in these documents are fictional.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import re
import unicodedata
import zipfile
from datetime import datetime
from html import escape
from pathlib import Path

from reportlab.lib import colors
from reportlab.lib.pagesizes import A4, LETTER
from reportlab.lib.styles import ParagraphStyle
from reportlab.lib.units import mm
from reportlab.platypus import (
    BaseDocTemplate,
    Frame,
    FrameBreak,
    Image,
    ListFlowable,
    ListItem,
    NextPageTemplate,
    PageTemplate,
    Paragraph,
    SimpleDocTemplate,
    Table,
    TableStyle,
)

SOURCES_DIR = Path(__file__).resolve().parent / "sources"
AUTHOR = "kb-ray"
FIXED_DATETIME = datetime(2025, 1, 1, 0, 0, 0)
FIXED_W3CDTF = "2025-01-01T00:00:00Z"
ZIP_EPOCH = (1980, 1, 1, 0, 0, 0)

# --------------------------------------------------------------------------------------
# PDF building blocks. A document is a list of (kind, payload) blocks; payload text is
# plain text (escaped here), so prose can contain "&" and "<" safely.
# --------------------------------------------------------------------------------------


def _pdf_styles(body_font: str = "Helvetica", body_size: float = 10.5) -> dict[str, ParagraphStyle]:
    return {
        "title": ParagraphStyle("DocTitle", fontName="Helvetica-Bold", fontSize=22, leading=27, spaceAfter=6),
        "subtitle": ParagraphStyle(
            "DocSubtitle", fontName="Helvetica", fontSize=10, leading=13, textColor=colors.HexColor("#444444"), spaceAfter=12
        ),
        "h1": ParagraphStyle("H1", fontName="Helvetica-Bold", fontSize=18, leading=22, spaceBefore=12, spaceAfter=6, keepWithNext=1),
        "h2": ParagraphStyle("H2", fontName="Helvetica-Bold", fontSize=14, leading=18, spaceBefore=8, spaceAfter=4, keepWithNext=1),
        "p": ParagraphStyle("Body", fontName=body_font, fontSize=body_size, leading=round(body_size * 1.38, 1), spaceAfter=6),
        "li": ParagraphStyle("ListBody", fontName=body_font, fontSize=body_size, leading=round(body_size * 1.38, 1), spaceAfter=2),
        "caption": ParagraphStyle("Caption", fontName="Helvetica-Oblique", fontSize=9.5, leading=12, spaceBefore=4, spaceAfter=6),
    }


def _text(text: str) -> str:
    return escape(text, quote=False).replace("\n", "<br/>")


def _pdf_list(items: list[str], styles: dict, *, numbered: bool) -> ListFlowable:
    entries = [ListItem(Paragraph(_text(item), styles["li"])) for item in items]
    if numbered:
        return ListFlowable(entries, bulletType="1", bulletFormat="%s.", leftIndent=20, bulletFontName="Helvetica", spaceAfter=6)
    return ListFlowable(entries, bulletType="bullet", start="\u2022", leftIndent=16, bulletFontName="Helvetica", spaceAfter=6)


def _pdf_table(rows: list[list[str]], col_widths: list[float] | None = None) -> Table:
    table = Table(rows, colWidths=col_widths, hAlign="LEFT", repeatRows=1, spaceAfter=8)
    table.setStyle(
        TableStyle(
            [
                ("FONT", (0, 0), (-1, 0), "Helvetica-Bold", 9.5),
                ("FONT", (0, 1), (-1, -1), "Helvetica", 9.5),
                ("BACKGROUND", (0, 0), (-1, 0), colors.HexColor("#D9E2EC")),
                ("GRID", (0, 0), (-1, -1), 0.5, colors.HexColor("#7B8794")),
                ("VALIGN", (0, 0), (-1, -1), "MIDDLE"),
                ("TOPPADDING", (0, 0), (-1, -1), 4),
                ("BOTTOMPADDING", (0, 0), (-1, -1), 4),
            ]
        )
    )
    return table


def _flowables(blocks: list[tuple], styles: dict) -> list:
    story = []
    for kind, payload in blocks:
        if kind in ("ul", "ol"):
            story.append(_pdf_list(payload, styles, numbered=kind == "ol"))
        elif kind == "table":
            story.append(_pdf_table(*payload))
        elif kind == "flowable":
            story.append(payload)
        else:
            story.append(Paragraph(_text(payload), styles[kind]))
    return story


def _simple_pdf(story: list, *, title: str, pagesize=A4, on_page=None, margin: float = 20 * mm) -> bytes:
    buf = io.BytesIO()
    doc = SimpleDocTemplate(
        buf, pagesize=pagesize, invariant=1, title=title, author=AUTHOR, subject=title, creator=AUTHOR,
        leftMargin=margin, rightMargin=margin, topMargin=margin, bottomMargin=margin,
    )
    if on_page is None:
        doc.build(story)
    else:
        doc.build(story, onFirstPage=on_page, onLaterPages=on_page)
    return buf.getvalue()


# --------------------------------------------------------------------------------------
# manual.pdf — operating manual with two heading levels, lists and a table.
# --------------------------------------------------------------------------------------

MANUAL_BLOCKS = [
    ("title", "AquaFlow AF-220 Centrifugal Pump"),
    ("subtitle", "Operating and Maintenance Manual — Document BH-MAN-0220, Revision C, issued 14 March 2024 by Brannock Hydraulics Ltd."),
    ("h1", "1 Introduction"),
    ("p", "The AquaFlow AF-220 is a single-stage, end-suction centrifugal pump designed for clean-water transfer, irrigation and pressure boosting in light commercial buildings. It is built around a closed bronze impeller, a cast-iron volute rated to 10 bar, and a totally enclosed fan-cooled (TEFC) motor. This manual applies to pumps with serial numbers beginning AF22-24 or later; earlier units use a different shaft seal and are covered by manual BH-MAN-0219."),
    ("h2", "1.1 About this manual"),
    ("p", "Read this manual completely before installing or operating the pump. Keep it with the pump for the life of the equipment and pass it on to any subsequent owner. Values are given in SI units; where a conversion is useful, the imperial value is shown in brackets. Illustrations of the pump assembly are available separately in the parts catalogue BH-CAT-0220."),
    ("h2", "1.2 Safety notices"),
    ("p", "Three levels of safety notice are used throughout this manual:"),
    ("ul", [
        "DANGER — an immediate hazard that will result in severe injury or death if ignored, such as contact with live motor terminals.",
        "WARNING — a hazard that could cause injury, for example pump surfaces hotter than 60 °C (140 °F) during continuous duty.",
        "CAUTION — a condition that could damage the pump or connected pipework, such as running the pump dry for more than 30 seconds.",
    ]),
    ("p", "Only qualified personnel may open the motor terminal box. Always isolate the electrical supply and lock out the isolator before removing guards, draining the volute or loosening any pipe connection."),
    ("h1", "2 Specifications"),
    ("h2", "2.1 Rated performance"),
    ("p", "The AF-220 is available in four motor sizes. All variants share the same 50 mm suction and 40 mm discharge flanges, so a larger motor can be fitted later without changing the pipework. Table 1 lists the rated performance of each variant at 2,900 rpm with clean water at 20 °C."),
    ("caption", "Table 1: Rated performance of AF-220 variants at 2,900 rpm"),
    ("table", ([
        ["Model", "Motor power (kW)", "Max. flow (m³/h)", "Max. head (m)", "Weight (kg)"],
        ["AF-220S", "1.5", "12", "32", "38"],
        ["AF-220M", "2.2", "18", "41", "44"],
        ["AF-220L", "3.0", "24", "48", "51"],
        ["AF-220X", "4.0", "30", "55", "59"],
    ], [70, 95, 95, 85, 75])),
    ("p", "Performance tolerances follow ISO 9906 Grade 2B: flow within ±8% and head within ±5% of the published curve. The best efficiency point of the AF-220M is 14 m³/h at 36 m head, where hydraulic efficiency reaches 68%."),
    ("h2", "2.2 Electrical requirements"),
    ("p", "Single-phase variants (suffix -1P) require a 230 V, 50 Hz supply protected by a 16 A type C circuit breaker. Three-phase variants (suffix -3P) require a 400 V, 50 Hz supply and a motor protection relay set to the full-load current shown on the nameplate. The motor insulation is class F with class B temperature rise, and the enclosure is rated IP55."),
    ("h1", "3 Installation"),
    ("h2", "3.1 Site preparation"),
    ("p", "Install the pump as close to the water source as practical, on a level concrete plinth at least 100 mm thick. Before placing the pump, confirm the following:"),
    ("ul", [
        "The suction lift does not exceed 4.5 m at sea level, reduced by 1 m for every 1,000 m of altitude.",
        "There is at least 300 mm of clear space around the motor fan cover for cooling air.",
        "The suction pipe is at least as large as the suction flange and rises continuously toward the pump, so that no air pockets can form.",
        "A non-return valve and an isolating valve are fitted on the discharge side.",
        "The room temperature stays between 0 °C and 40 °C and the pump is protected from frost.",
    ]),
    ("p", "Anchor the baseplate with four M12 anchor bolts tightened to 45 N·m. Support the suction and discharge pipes independently so that no pipe load is transmitted to the pump flanges."),
    ("h2", "3.2 Priming the pump"),
    ("p", "The AF-220 is not self-priming. The volute and the suction pipe must be completely filled with water before the first start and after any period in which the pump has been drained."),
    ("ol", [
        "Close the discharge isolating valve.",
        "Remove the priming plug (part AF-PP-04) on top of the volute.",
        "Fill the volute through the priming port until water flows out without bubbles.",
        "Refit the priming plug with a new sealing washer and tighten it to 25 N·m.",
        "Open the suction valve fully and check that no air is drawn in at the pipe joints.",
    ]),
    ("h1", "4 Operation"),
    ("h2", "4.1 Start-up procedure"),
    ("ol", [
        "Check that the shaft turns freely by hand through the fan cover.",
        "Verify that the pump is primed as described in section 3.2.",
        "Open the discharge valve by approximately one quarter turn.",
        "Switch on the supply and confirm that the motor rotates clockwise when viewed from the fan end; on three-phase units, swap any two phases if the rotation is wrong.",
        "Open the discharge valve slowly until the required flow or pressure is reached.",
        "Record the discharge pressure and the motor current in the commissioning log (form BH-F-31).",
    ]),
    ("h2", "4.2 Normal operating limits"),
    ("p", "During normal operation the discharge pressure must remain below 8 bar, the liquid temperature between 2 °C and 90 °C, and the number of starts below 20 per hour. Never run the pump against a closed discharge valve for more than 2 minutes, because the water in the volute heats rapidly and can damage the mechanical seal. A small leakage at the seal of up to 5 drops per minute is normal during the first 24 hours while the seal faces bed in."),
    ("h1", "5 Maintenance"),
    ("h2", "5.1 Scheduled maintenance"),
    ("ul", [
        "Weekly: check for abnormal noise, vibration and leakage, and record the discharge pressure.",
        "Every 3 months: clean the suction strainer and inspect the flexible pipe connectors.",
        "Every 12 months or 4,000 operating hours: measure the motor insulation resistance (minimum 5 megohms at 500 V DC) and check the bearing temperature.",
        "Every 3 years or 12,000 operating hours: replace the mechanical seal and the volute O-ring.",
    ]),
    ("h2", "5.2 Replacement parts"),
    ("p", "Use only genuine Brannock spare parts. The most frequently ordered parts are the mechanical seal kit AF-SK-118, the bronze impeller AF-IMP-220B, the volute O-ring set AF-OR-07 and the motor fan cover AF-FC-90. When ordering, quote the pump serial number from the nameplate, which is riveted to the motor housing above the terminal box."),
    ("p", "The motor bearings are sealed-for-life deep-groove ball bearings: a 6204-2RS on the drive end and a 6203-2RS on the non-drive end. They do not require greasing and should be replaced as a pair whenever one of them shows signs of wear."),
    ("h1", "6 Troubleshooting"),
    ("ul", [
        "Pump runs but delivers no water: the pump is not primed, the suction valve is closed, or the suction lift is too high. Re-prime the pump and check the suction side.",
        "Reduced flow: the strainer is blocked, the impeller is worn, or the motor is running in the wrong direction.",
        "Motor trips on overload: the supply voltage is more than 10% below nominal, or the pump is operating far to the right of its curve at very low head.",
        "Excessive noise: cavitation caused by insufficient NPSH available; reduce the suction lift or throttle the discharge.",
    ]),
    ("p", "If a fault persists, contact Brannock Technical Support on +44 161 555 0142 or support@brannock-hydraulics.example, quoting the document number BH-MAN-0220 and the pump serial number. Warranty claims must be made within 24 months of the installation date recorded on form BH-F-31."),
]


def build_manual_pdf() -> bytes:
    return _simple_pdf(_flowables(MANUAL_BLOCKS, _pdf_styles()), title="AquaFlow AF-220 Operating and Maintenance Manual")


# --------------------------------------------------------------------------------------
# two_column.pdf — article with a full-width title and two text columns.
# --------------------------------------------------------------------------------------

ARTICLE_TITLE = "Restoring Eelgrass Meadows in Halvik Bay: Results of the 2019–2024 Transplant Programme"
ARTICLE_BYLINE = "Ingrid Solberg and Tomas Varga, Halvik Marine Institute — Coastal Ecology Bulletin, Vol. 12, No. 3, September 2025"

ARTICLE_BLOCKS = [
    ("h2", "Abstract"),
    ("p", "Between 2019 and 2024 the Halvik Marine Institute transplanted 38,400 eelgrass (Zostera marina) shoots into 4.2 hectares of bare sediment in the inner basin of Halvik Bay. After five growing seasons, 61 percent of the planted plots supported a continuous meadow, and shoot density in the best plots reached 310 shoots per square metre, comparable to the natural reference meadow at Skjold Point. This article summarises the methods, the results and the lessons for future restoration along the Skagerrak coast."),
    ("h2", "Background"),
    ("p", "Eelgrass once covered an estimated 190 hectares of Halvik Bay. Aerial photographs from 1962 show continuous meadows along the northern shore between the harbour mole and the mouth of the Lysa river. By 2005 less than 20 hectares remained. The decline is attributed mainly to nutrient runoff from farmland in the Lysa catchment, which clouded the water with phytoplankton, and to the 1987 dredging of the ferry channel, which resuspended fine sediment for several years."),
    ("p", "Water quality has improved markedly since the regional wastewater plant at Ostby was upgraded in 2014. Mean summer Secchi depth, a simple measure of water clarity, rose from 2.1 m in the period 2005–2010 to 3.4 m in 2015–2018. Despite this, the meadows did not recover on their own, because eelgrass spreads slowly and the nearest seed source was more than 6 km away. Active transplantation was therefore proposed in the Halvik Bay Management Plan adopted by the municipal council in March 2018."),
    ("h2", "Methods"),
    ("p", "Donor shoots were collected by divers from the Skjold Point meadow, never removing more than 10 percent of the shoots from any square metre. Shoots were planted within 36 hours of collection using the horizontal rhizome method, in which each planting unit consists of two shoots anchored with a biodegradable bamboo staple."),
    ("p", "Planting took place in 1 × 1 m plots at depths between 1.5 and 4.0 m. Each plot received 16 planting units on a regular grid with 25 cm spacing. A total of 1,200 plots were planted over four seasons: 180 in 2019, 320 in 2020, 400 in 2021 and 300 in 2022. Plots were monitored each August by counting shoots in a 0.25 m² quadrat at the plot centre."),
    ("p", "Alongside the transplant plots, the team logged light, temperature and turbidity at six fixed stations every 15 minutes. The loggers were cleaned every two weeks between May and September to prevent fouling, and the data were used to calculate the percentage of surface light reaching the seabed at each plot."),
    ("h2", "Results"),
    ("p", "Survival after the first winter averaged 72 percent but varied strongly with depth. Plots shallower than 2 m suffered losses from ice scour in the cold winter of 2021, when sea ice persisted in the inner basin for 23 days. Plots deeper than 3.5 m grew poorly because light at the sediment surface fell below 20 percent of surface irradiance for much of the summer. The most successful depth band was 2.0 to 3.0 m, where 84 percent of plots survived and merged into continuous patches."),
    ("p", "By August 2024, 733 of the 1,200 plots (61 percent) were classified as established, meaning that shoot density exceeded 100 shoots per square metre and the plot had expanded beyond its original boundary. The best plots reached 310 shoots per square metre, while the reference meadow at Skjold Point held between 290 and 350 shoots per square metre over the same period."),
    ("p", "Fish surveys using a 15 m beach seine recorded juvenile Atlantic cod in the restored area for the first time in 2023. Catches of pipefish and two-spotted goby were four times higher over the restored meadow than over the adjacent bare sand, and the sediment organic carbon content in established plots rose from 0.4 to 0.9 percent between 2020 and 2024."),
    ("h2", "Discussion"),
    ("p", "The programme shows that eelgrass restoration can succeed in the Skagerrak once water quality has recovered, but only if planting is matched to the local light climate. We recommend that future projects restrict planting to depths where the modelled summer light at the seabed exceeds 25 percent of surface irradiance, and avoid the shallowest zone where winter ice is likely."),
    ("p", "The total cost of the programme was NOK 9.6 million, or about NOK 2.3 million per hectare planted. Diver time accounted for 58 percent of the cost. Seed-based methods, in which flowering shoots are collected in July and the seeds released from buoyed mesh bags in autumn, may reduce costs substantially and will be trialled in the outer basin from 2026."),
    ("p", "Two practical lessons stand out. First, monitoring the donor meadow is as important as monitoring the plots: the Skjold Point meadow was surveyed every year and showed no measurable loss of density from harvesting. Second, early engagement with boat owners paid off; after the marina association agreed to move 40 moorings away from the planting area in 2020, propeller and anchor damage fell to almost zero."),
    ("h2", "Acknowledgements"),
    ("p", "The programme was funded by the Skagerrak Coastal Trust (grant SCT-2019-4471) and the Halvik Municipality Climate Fund. We thank the volunteer divers of the Halvik Diving Club, who contributed more than 1,100 hours of fieldwork, and the crew of the research vessel Maren for logistical support."),
]


def build_two_column_pdf() -> bytes:
    styles = _pdf_styles(body_font="Times-Roman", body_size=10.5)
    styles["title"] = ParagraphStyle("ArticleTitle", parent=styles["title"], fontSize=20, leading=24)
    width, height = A4
    margin, gutter, title_height = 18 * mm, 8 * mm, 34 * mm
    col_width = (width - 2 * margin - gutter) / 2
    body_height = height - 2 * margin

    def columns(top_offset: float, prefix: str) -> list[Frame]:
        h = body_height - top_offset
        return [Frame(margin + i * (col_width + gutter), margin, col_width, h, id=f"{prefix}{i}") for i in (0, 1)]

    title_frame = Frame(margin, height - margin - title_height, width - 2 * margin, title_height, id="title")
    buf = io.BytesIO()
    doc = BaseDocTemplate(buf, pagesize=A4, invariant=1, title=ARTICLE_TITLE, author=AUTHOR, creator=AUTHOR)
    doc.addPageTemplates([
        PageTemplate(id="first", frames=[title_frame, *columns(title_height + 4 * mm, "first")]),
        PageTemplate(id="later", frames=columns(0, "later")),
    ])
    story = [Paragraph(_text(ARTICLE_TITLE), styles["title"]), Paragraph(_text(ARTICLE_BYLINE), styles["subtitle"])]
    story += [NextPageTemplate("later"), FrameBreak(), *_flowables(ARTICLE_BLOCKS, styles)]
    doc.build(story)
    return buf.getvalue()


# --------------------------------------------------------------------------------------
# headers_footers.pdf — running header and "Page N of M" footer on every page.
# --------------------------------------------------------------------------------------

SAFETY_HEADER = "Acme Corp — Annual Safety Report 2025"

SAFETY_BLOCKS = [
    ("title", "Annual Safety Report 2025"),
    ("subtitle", "Acme Corp Health, Safety and Environment Department — published 20 February 2026"),
    ("h1", "1 Message from the Chief Safety Officer"),
    ("p", "2025 was the safest year in Acme Corp's 41-year history. Across our seven manufacturing sites and two distribution centres, our 6,850 employees and contractors worked 13.2 million hours with no fatalities and no life-altering injuries. Our total recordable incident rate (TRIR) fell to 0.84 per 200,000 hours worked, down from 1.12 in 2024 and well below the industry benchmark of 2.7 published by the national manufacturers' association."),
    ("p", "These results did not happen by accident. They reflect the work of hundreds of safety representatives, of supervisors who stopped jobs when conditions were not right, and of teams that reported near misses openly so that we could learn from them. At the same time, we are not satisfied. Two serious incidents during the year, described in section 3, showed that our controls for work at height and for contractor lockout still have gaps. Closing those gaps is the first priority of our 2026 plan. — Margaret Okafor, Chief Safety Officer"),
    ("h1", "2 Safety Performance Summary"),
    ("h2", "2.1 Key indicators"),
    ("p", "The key indicators for 2025, compared with the previous year, were as follows:"),
    ("ul", [
        "Total recordable incident rate (TRIR): 0.84 (2024: 1.12).",
        "Lost-time injury rate (LTIR): 0.21 (2024: 0.33).",
        "Recordable injuries: 55 (2024: 71), of which 14 resulted in lost time.",
        "Days away from work: 312 (2024: 498).",
        "Near-miss reports submitted: 4,906 (2024: 3,870), an increase of 27 percent.",
        "Serious incidents with potential for fatality (SIF): 2 (2024: 3).",
    ]),
    ("h2", "2.2 Performance by site"),
    ("p", "Performance improved at seven of the nine sites. The Dayton stamping plant worked 1.1 million hours without a lost-time injury between March and December, the longest run in its history. The Rotterdam distribution centre recorded the lowest TRIR in the company at 0.31. The Monterrey assembly plant saw its TRIR rise from 0.95 to 1.26, driven by a cluster of hand lacerations on the new wiring harness line; a glove upgrade to cut level F and a redesigned cutting jig were introduced in September, and no further lacerations occurred in the final quarter."),
    ("p", "The Ridgeway foundry remains our highest-risk site because of molten metal handling. Its TRIR fell from 2.40 to 1.85 after the installation of remote tapping equipment on furnaces 2 and 3, which removed operators from the splash zone during the most hazardous step of the pour."),
    ("h1", "3 Serious Incidents"),
    ("h2", "3.1 Fall from a mezzanine at Ridgeway"),
    ("p", "On 14 May 2025 a maintenance technician at the Ridgeway foundry fell 2.4 m from an unguarded edge of the baghouse mezzanine while replacing a filter cartridge. The technician suffered a fractured wrist and returned to full duties after 41 days. The investigation found that a section of guardrail had been removed in 2023 to lift in a new fan and had never been reinstated, and that the mezzanine had been left out of the site's annual work-at-height inspection."),
    ("p", "Corrective actions included reinstating the guardrail within 24 hours, a company-wide survey of all elevated platforms, which identified 17 further deficiencies (all closed by August), and a new rule that any removal of permanent guarding requires a permit signed by the site engineering manager."),
    ("h2", "3.2 Contractor lockout failure at Dayton"),
    ("p", "On 2 October 2025 a contractor electrician at the Dayton plant began work on a conveyor control panel that had been isolated at the local switch but not locked out at the motor control centre. A production operator re-energised the conveyor from the control room while the electrician's hands were inside the panel. No one was injured, but the event had clear potential for a fatality and was classified as a SIF precursor."),
    ("p", "As a result, contractors must now attend the same four-hour lockout/tagout course as employees before receiving a site badge, and each contractor crew must apply its own personal locks in addition to the supervisor's group lock."),
    ("h1", "4 Programmes and Training"),
    ("p", "Employees completed 12,400 hours of safety training in 2025. The main programmes were:"),
    ("ul", [
        "Forklift recertification: 1,140 operators were recertified under the new practical assessment, which includes a timed pedestrian-zone exercise.",
        "Stop-Work Authority: all supervisors completed a half-day workshop; 312 stop-work interventions were logged, compared with 95 in 2024.",
        "Ergonomics: 46 workstations were redesigned following assessments by the ergonomics team led by Dr. Priya Raman.",
        "Heat stress: a heat index alert system was introduced at Monterrey and Ridgeway, with mandatory rest breaks when the index exceeds 32 °C.",
    ]),
    ("p", "We also launched the Acme SafeStart mobile app in April. By year end, employees used it to submit 61 percent of all near-miss reports, and the median time from a report to the first response by a supervisor fell from 5 days to 19 hours."),
    ("h1", "5 Health and Wellbeing"),
    ("p", "Occupational illness cases fell from 9 to 6. Five of the six were noise-induced hearing loss identified through annual audiometric testing; all affected employees have been moved to quieter roles or given custom-moulded hearing protection. Noise mapping at the Dayton press shop identified 12 locations above 85 dB(A), and acoustic enclosures were installed on the four loudest presses."),
    ("p", "The employee assistance programme was used by 7.5 percent of employees, up from 5.2 percent, following a campaign to reduce the stigma around mental health. Trained mental health first aiders are now available on every shift at every site."),
    ("h1", "6 Goals for 2026"),
    ("p", "Our goals for 2026 are:"),
    ("ol", [
        "Reduce TRIR to 0.70 or below across the company.",
        "Achieve zero serious incidents with potential for fatality.",
        "Complete the work-at-height engineering upgrades at Ridgeway and Monterrey by 30 June 2026.",
        "Extend the SafeStart app to all contractors by the end of the first quarter.",
        "Increase near-miss reporting to 6,000 reports while reducing the median response time to 12 hours.",
    ]),
    ("p", "Progress against these goals will be reported quarterly to the Board Safety Committee, chaired by non-executive director Alan Whitcombe, and published in next year's report."),
]


def build_headers_footers_pdf() -> bytes:
    styles = _pdf_styles(body_size=11)
    pages = {"total": 0, "seen": 0}

    def furniture(canvas, doc) -> None:
        width, height = LETTER
        pages["seen"] = doc.page
        canvas.saveState()
        canvas.setFont("Helvetica", 9)
        canvas.drawString(22 * mm, height - 13 * mm, SAFETY_HEADER)
        canvas.line(22 * mm, height - 15 * mm, width - 22 * mm, height - 15 * mm)
        canvas.drawCentredString(width / 2, 11 * mm, f"Page {doc.page} of {pages['total']}")
        canvas.restoreState()

    def render() -> bytes:
        story = _flowables(SAFETY_BLOCKS, styles)
        return _simple_pdf(story, title=SAFETY_HEADER, pagesize=LETTER, on_page=furniture, margin=24 * mm)

    render()  # the first pass only counts pages so the second can print "Page N of M"
    pages["total"] = pages["seen"]
    return render()


# --------------------------------------------------------------------------------------
# no_headings.pdf — a two-page letter, every line in one font and size.
# --------------------------------------------------------------------------------------

LETTER_PARAGRAPHS = [
    "Northgate Library Trust\n14 Carrow Street\nNorwich NR1 3PL",
    "12 June 2025",
    "Ms Eleanor Pryce\nDirector, Millbrook Community Archive\nThe Old Schoolhouse, Mill Lane\nMillbrook, Suffolk IP14 6RT",
    "Dear Ms Pryce,",
    "I am delighted to write on behalf of the trustees of the Northgate Library Trust to confirm that your application for the Millbrook Photographic Heritage Project has been successful. At their meeting on 4 June 2025 the trustees agreed to award the Millbrook Community Archive a grant of £48,500 towards the total project cost of £63,200. Your grant reference is NLT-2025-0417, and I would be grateful if you would quote it in all future correspondence.",
    "The trustees were particularly impressed by the scale and fragility of the collection you described. The archive's holding of some 1,900 glass-plate negatives taken by the Millbrook photographer Arthur Denholm between 1898 and 1931 is, as far as we are aware, the largest surviving body of work by a village photographer in East Anglia. The panel also welcomed your plan to involve local schools through oral history sessions, and the letters of support from Millbrook Primary School and the Suffolk Record Office.",
    "The grant is awarded for the purposes set out in your application dated 17 February 2025, namely the cleaning, rehousing and digitisation of the Denholm negatives, the purchase of a copy stand and a medium-format camera back, the recruitment of a part-time project officer for eighteen months, and the creation of an online catalogue. Any significant change to these purposes, to the project timetable or to the budget requires the written agreement of the Trust in advance. Minor variations of up to ten percent between budget lines may be made without prior approval, provided that they are explained in your next progress report.",
    "The grant will be paid in three instalments. The first instalment of £24,250 will be paid within twenty working days of our receiving the signed acceptance form enclosed with this letter. The second instalment of £16,975 will be released on receipt of a satisfactory interim report, which is due by 31 March 2026. The final instalment of £7,275 will be paid once the project is complete and we have received your final report and a statement of expenditure certified by your treasurer. The final report is due no later than 30 September 2026.",
    "Your interim and final reports should describe the progress made against the outcomes in your application, including the number of negatives digitised, the number of volunteers trained and the number of pupils who took part in the school sessions. Please also include a small selection of digitised images, which the Trust may use in its annual review and on its website with appropriate credit to the archive. The Trust will not use the images for any commercial purpose.",
    "Please note the following conditions, which form part of the grant agreement. The archive must acknowledge the support of the Northgate Library Trust in all publicity material and on the online catalogue, using the logo that our communications officer, Mr Daniel Osei, will send to you separately. Equipment purchased with the grant must remain the property of the archive and may not be sold or disposed of within five years without the Trust's consent. Any unspent funds at the end of the project must be returned to the Trust within two months of the final report. The Trust reserves the right to withhold or reclaim payments if the grant is not used for the agreed purposes.",
    "As part of our usual practice, one of our trustees, Professor Helen Marsh, would like to visit the archive during the first six months of the project to see the collection and meet the project team. She will contact you directly to arrange a convenient date. There is no need to prepare anything formal for this visit; it is simply an opportunity for the Trust to learn more about your work and for you to raise any questions in person.",
    "To accept the grant, please sign and return both copies of the enclosed acceptance form by 11 July 2025, together with a copy of the archive's most recent bank statement showing the name and number of the account into which the grant should be paid. If we do not receive the signed form by that date, the offer may be withdrawn. If you have any questions about the conditions or the payment arrangements, please do not hesitate to contact me on 01603 555 218 or by email at grants@northgatetrust.example.",
    "May I once again congratulate you and your colleagues on a thoughtful and well-prepared application. The trustees look forward to following the progress of the project and to seeing Arthur Denholm's photographs made available to a new generation of readers and researchers.",
    "Yours sincerely,",
    "Jonathan Abernathy\nGrants Officer, Northgate Library Trust",
    "Enclosures: grant acceptance form (two copies); Trust logo guidelines",
]


def build_no_headings_pdf() -> bytes:
    style = ParagraphStyle("Letter", fontName="Times-Roman", fontSize=11.5, leading=16, spaceAfter=11)
    story = [Paragraph(_text(text), style) for text in LETTER_PARAGRAPHS]
    return _simple_pdf(story, title="Grant award letter NLT-2025-0417", margin=25 * mm)


# --------------------------------------------------------------------------------------
# figure.pdf — an embedded PNG chart with a "Figure 1:" caption.
# --------------------------------------------------------------------------------------

TEMP_COEFFICIENT = -0.0034  # per °C, SolVerde SV-405M


def _derating_chart_png() -> bytes:
    from PIL import Image as PILImage
    from PIL import ImageDraw, ImageFont

    width, height, left, right, top, bottom = 600, 340, 60, 20, 20, 40
    t_min, t_max, p_min, p_max = -10, 80, 80, 115
    img = PILImage.new("RGB", (width, height), "white")
    draw = ImageDraw.Draw(img)
    font = ImageFont.load_default()

    def xy(t: float, p: float) -> tuple[float, float]:
        x = left + (t - t_min) / (t_max - t_min) * (width - left - right)
        y = top + (p_max - p) / (p_max - p_min) * (height - top - bottom)
        return x, y

    for t in range(t_min, t_max + 1, 10):
        draw.line([xy(t, p_min), xy(t, p_max)], fill="#DDDDDD")
        draw.text((xy(t, p_min)[0] - 8, height - bottom + 6), str(t), fill="black", font=font)
    for p in range(p_min, p_max + 1, 5):
        draw.line([xy(t_min, p), xy(t_max, p)], fill="#DDDDDD")
        draw.text((left - 30, xy(t_min, p)[1] - 6), str(p), fill="black", font=font)
    draw.rectangle([xy(t_min, p_max), xy(t_max, p_min)], outline="black")
    curve = [xy(t, 100 * (1 + TEMP_COEFFICIENT * (t - 25))) for t in range(t_min, t_max + 1)]
    draw.line(curve, fill="#1F6FB2", width=3)
    sx, sy = xy(25, 100)
    draw.ellipse([sx - 5, sy - 5, sx + 5, sy + 5], fill="#D64545")
    draw.text((sx + 8, sy - 18), "STC (25 C, 100%)", fill="#D64545", font=font)
    draw.text((width / 2 - 60, height - 18), "Cell temperature (C)", fill="black", font=font)
    out = io.BytesIO()
    img.save(out, format="PNG")
    return out.getvalue()


FIGURE_BLOCKS_BEFORE = [
    ("title", "Field Note FN-17: Thermal Derating of the SolVerde SV-405M Module"),
    ("subtitle", "SolVerde Energy, Applications Engineering — revised 8 August 2024"),
    ("p", "Photovoltaic modules produce less power as they get hotter. For crystalline silicon cells the loss is nearly linear in cell temperature and is described by the temperature coefficient of maximum power, which for the SolVerde SV-405M monocrystalline module is -0.34 percent per degree Celsius. The rated output of 405 W is measured under Standard Test Conditions (STC): an irradiance of 1,000 W/m², air mass 1.5 and a cell temperature of 25 °C."),
    ("p", "On a clear summer day, cell temperatures on a roof-mounted array commonly reach 60 to 70 °C, well above the STC reference. Figure 1 shows the relative output of the module across its operating temperature range, calculated from the temperature coefficient and checked against measurements taken at the Almeria outdoor test site in July 2024."),
]

FIGURE_CAPTION = "Figure 1: Relative power output of the SolVerde SV-405M module versus cell temperature, normalised to 100% at 25 °C (STC)."

FIGURE_BLOCKS_AFTER = [
    ("h2", "Reading the chart"),
    ("p", "At a cell temperature of 65 °C, 40 degrees above STC, the module delivers about 86.4 percent of its rated power, or roughly 350 W. Conversely, on a cold, bright winter morning with the cells at 0 °C the module can briefly exceed its nameplate rating, producing about 108.5 percent, or 439 W. Inverters and string fuses must therefore be sized for this cold-weather peak and not only for the nameplate value."),
    ("h2", "Reducing thermal losses"),
    ("p", "Cell temperature depends on irradiance, ambient temperature, wind speed and the way the module is mounted. The nominal operating cell temperature (NOCT) of the SV-405M is 43 °C ± 2 °C, measured at 800 W/m² irradiance, 20 °C ambient temperature and a wind speed of 1 m/s. Installers can reduce thermal losses by leaving a gap of at least 100 mm between the module and the roof surface so that air can circulate, by avoiding dark roof membranes directly beneath the array, and by choosing racking that does not block airflow at the module edges."),
    ("p", "In our measurements, flush-mounted modules with a 30 mm gap ran on average 11 °C hotter than identical modules on an open-rack system with a 150 mm gap, which corresponds to an energy yield penalty of about 3.7 percent over a typical summer month. Questions about this field note can be sent to applications@solverde.example, quoting reference FN-17."),
]


def build_figure_pdf() -> bytes:
    styles = _pdf_styles()
    chart = Image(io.BytesIO(_derating_chart_png()), width=150 * mm, height=85 * mm)
    chart.hAlign = "LEFT"
    blocks = [*FIGURE_BLOCKS_BEFORE, ("flowable", chart), ("caption", FIGURE_CAPTION), *FIGURE_BLOCKS_AFTER]
    return _simple_pdf(_flowables(blocks, styles), title="Field Note FN-17: Thermal Derating")


# --------------------------------------------------------------------------------------
# long_report.pdf — a 5-6 page report with many sections.
# --------------------------------------------------------------------------------------

REPORT_BLOCKS = [
    ("title", "Lakeshore Regional Freight Rail Feasibility Study"),
    ("subtitle", "Final Report LRTA-FS-2025-03 — prepared for the Lakeshore Regional Transport Authority by Meridian Transport Consultants — June 2025"),
    ("h1", "Executive Summary"),
    ("p", "The Lakeshore Regional Transport Authority (LRTA) commissioned Meridian Transport Consultants in September 2024 to assess whether a dedicated freight rail link between the Port of Carver Bay and the inland logistics hub at Millford Junction is technically feasible, financially viable and environmentally acceptable. The study examined three alignment options within a corridor roughly 64 kilometres long, forecast freight demand to 2050, estimated capital and operating costs, and assessed the wider economic benefits."),
    ("p", "We conclude that the link is feasible and recommend Option B, the Eastern Valley alignment, for further development. Option B has an estimated capital cost of $1.18 billion in 2025 prices, a benefit-cost ratio of 1.64 under the central demand scenario, and the lowest environmental impact of the three options. We recommend that the LRTA proceed to a detailed design and environmental impact assessment phase, with construction starting in 2028 and the first trains running in 2032."),
    ("p", "The study drew on roadside traffic surveys, interviews with 46 freight operators and shippers, a desktop review of environmental constraints and three rounds of community engagement. All costs in this report are expressed in 2025 prices and exclude land already owned by the LRTA or the port company. Forecasts are presented for low, central and high growth scenarios; unless stated otherwise, figures refer to the central scenario."),
    ("h1", "1 Introduction"),
    ("h2", "1.1 Background"),
    ("p", "The Port of Carver Bay handled 1.42 million twenty-foot equivalent units (TEU) of containers in 2024, making it the third-largest container port on the eastern seaboard. Almost all of this traffic leaves the port by road. On an average weekday 5,300 heavy goods vehicles enter or leave the port gates, and most of them travel along State Highway 9 to the distribution warehouses clustered around Millford Junction. The highway carries more than 31,000 vehicles per day on its busiest section, and congestion at the Harlow interchange routinely adds 25 minutes to truck journeys in the morning peak."),
    ("p", "A rail connection between the port and Millford Junction was first proposed in the 1998 Lakeshore Regional Plan but was not pursued, because traffic volumes were then too low to justify the investment. Since then, container volumes at the port have grown at an average rate of 4.1 percent per year, and the port's own 2023 master plan foresees the opening of a fourth container berth at North Quay in 2029. Without a rail link, the number of port trucks on State Highway 9 is forecast to reach 9,000 per weekday by 2040."),
    ("h2", "1.2 Scope of the study"),
    ("p", "The terms of reference required the study team to:"),
    ("ul", [
        "identify and compare feasible alignments for a freight rail link between the port and Millford Junction;",
        "forecast freight demand for the link in 2035 and 2050 under low, central and high growth scenarios;",
        "estimate capital costs to a Class 4 accuracy (minus 30 to plus 50 percent);",
        "assess environmental, social and land-use impacts at a screening level; and",
        "calculate a benefit-cost ratio for each option and recommend a preferred option.",
    ]),
    ("p", "Passenger services were outside the scope of the study, although we note in section 8 where design choices would preserve the option of adding them later. The study was overseen by a steering group chaired by Deborah Kline, the LRTA's Director of Strategic Planning, which met six times between October 2024 and May 2025."),
    ("h1", "2 Study Area"),
    ("p", "The study corridor runs north-west from the port across the low-lying Carver estuary, climbs through either the Eastern Valley or the Brenner Hills, and ends on the flat plateau around Millford Junction at an elevation of about 210 metres above sea level. The corridor crosses two rivers, the Carver and the Tamsin, one state highway and eleven local roads. The main environmental constraints are the Carver Estuary Wetlands, a protected area of 1,850 hectares listed under the national wetlands convention, and the Brenner Hills Forest Reserve, which contains the only known breeding population of the grey-crowned warbler in the region."),
    ("p", "Land use along the corridor is mixed. Near the port, land is largely industrial. The middle section is dominated by dairy farming and apple orchards, and the final 12 kilometres pass through the growing suburbs of Millford and Eastbrook, where about 4,200 homes have been built since 2015. Existing rail infrastructure is limited to the single-track Millford branch, a lightly used line built in 1911 that currently carries two grain trains per week to the Millford co-operative silos."),
    ("h1", "3 Current and Forecast Freight Demand"),
    ("h2", "3.1 Current traffic"),
    ("p", "Roadside surveys carried out in November 2024 at four locations on State Highway 9 recorded 4,870 heavy vehicle movements per day linked to the port, of which 78 percent carried containers. Interviews with 46 freight operators and shippers showed that 62 percent of port containers are destined for, or originate from, warehouses within 10 kilometres of Millford Junction. This concentration of demand at a single inland destination is the main reason a rail shuttle is attractive: trains can run as fixed-formation shuttles between two terminals without the need for complex marshalling, and the inland terminal can be placed within a short truck trip of most warehouses."),
    ("h2", "3.2 Forecasts"),
    ("p", "We prepared forecasts using the LRTA regional freight model, updated with the 2024 survey data. Under the central scenario, container throughput at the port rises to 2.05 million TEU by 2035 and 2.9 million TEU by 2050. Assuming a rail mode share of 28 percent for flows to and from Millford Junction, the rail link would carry about 340,000 TEU in 2035, equivalent to 14 trains per day in each direction, rising to 510,000 TEU and 21 trains per day in 2050. The low scenario, which assumes growth of 2 percent per year and a rail share of 20 percent, gives 190,000 TEU in 2035. The high scenario, with growth of 5.5 percent per year and a rail share of 35 percent, gives 480,000 TEU in 2035."),
    ("p", "Bulk traffic was also considered. The Tamsin quarry, which currently sends 1.1 million tonnes of aggregate per year by road, has indicated that it would transfer about 60 percent of this tonnage to rail if a siding were provided at a reasonable charge. Aggregate traffic is included in the central scenario from 2033 and adds two trains per day in each direction."),
    ("h1", "4 Alignment Options"),
    ("p", "Twelve initial route ideas were developed in a workshop with LRTA staff, the port company and the three local councils in October 2024. These were screened against engineering, environmental and cost criteria, and three options were taken forward for detailed assessment. All three options assume a single-track railway with passing loops, designed for 25-tonne axle loads and trains up to 1,500 metres long, and electrified at 25 kV AC."),
    ("h2", "4.1 Option A: Coastal alignment"),
    ("p", "Option A follows the existing Millford branch for most of its length, upgrading it to modern standards and adding a new 9-kilometre connection across the estuary to the port. It is the shortest surface option at 58 kilometres and makes the greatest use of existing railway land. However, the estuary crossing would require a 2.3-kilometre viaduct through the Carver Estuary Wetlands, and the upgraded branch passes within 50 metres of some 1,600 homes in Eastbrook, where noise mitigation would be extensive."),
    ("h2", "4.2 Option B: Eastern Valley alignment"),
    ("p", "Option B leaves the port to the north, skirts the eastern edge of the wetlands on reclaimed industrial land, and follows the Eastern Valley on a new alignment before joining the Millford branch 8 kilometres short of Millford Junction. At 64 kilometres it is slightly longer than Option A, but it avoids the protected wetlands entirely and passes close to far fewer homes. The ruling gradient is 1 in 100, which allows a 1,500-metre train to be hauled by two standard electric locomotives. The journey time between terminals would be 62 minutes."),
    ("h2", "4.3 Option C: Brenner Hills tunnel"),
    ("p", "Option C takes the most direct line between the two terminals, passing under the Brenner Hills in a 6.8-kilometre tunnel. At 55 kilometres it has the shortest route and journey time, 48 minutes, and the least surface impact on the forest reserve. However, tunnelling in the fractured sandstone of the Brenner Hills carries considerable geological risk, and the cost of the tunnel alone is estimated at $720 million."),
    ("h1", "5 Cost Estimates"),
    ("p", "Capital costs were estimated using unit rates from recent rail projects in the region, adjusted to 2025 prices, and include a risk allowance appropriate to a Class 4 estimate. Table 1 summarises the results. Operating and maintenance (O&M) costs were estimated from first principles for the central scenario train plan and are expressed as an annual average over the first 30 years of operation."),
    ("caption", "Table 1: Summary of estimated costs by option (2025 prices)"),
    ("table", ([
        ["Option", "Length (km)", "Capital cost ($ million)", "Annual O&M ($ million)", "Risk allowance"],
        ["A  Coastal", "58", "1,040", "31", "28%"],
        ["B  Eastern Valley", "64", "1,180", "34", "25%"],
        ["C  Brenner Hills", "55", "1,690", "37", "40%"],
    ], [105, 70, 120, 120, 85])),
    ("p", "Although Option A has the lowest capital cost, the cost of noise barriers and of a viaduct design that minimises wetland impacts could increase significantly once detailed environmental requirements are known. Option C's tunnel dominates its cost and risk profile; the 40 percent risk allowance reflects the limited geotechnical data currently available, which come from only three boreholes drilled in 1994."),
    ("h1", "6 Environmental and Social Considerations"),
    ("h2", "6.1 Ecology"),
    ("p", "Option A would require the permanent loss of about 11 hectares of wetland habitat and a permit under the national wetlands legislation, which in our view is unlikely to be granted given that a practicable alternative exists. Option B avoids protected habitats but crosses 14 small streams, for which we have allowed culverts designed for fish passage. Option C would require two ventilation shafts and a construction compound inside the Brenner Hills Forest Reserve, with potential disturbance to the warbler breeding population during the five-year construction period."),
    ("h2", "6.2 Noise and communities"),
    ("p", "We estimate that 1,640 homes lie within 100 metres of the Option A alignment, compared with 390 for Option B and 210 for Option C. Night-time freight operations would be needed to achieve the forecast train numbers, so noise barriers, rail dampers and, where necessary, acoustic glazing for affected homes have been included in all cost estimates. Community engagement sessions held in Eastbrook, Harlow and Millford in February 2025 were attended by 730 people. The most frequent concerns raised were night-time noise, delays at level crossings and the effect on property values. In response, all three options now assume that the eleven local road crossings will be grade-separated, either by bridges or by underpasses, so that no level crossings remain on the new railway."),
    ("h2", "6.3 Carbon"),
    ("p", "Rail freight produces substantially lower greenhouse gas emissions per tonne-kilometre than road haulage. Based on the national emission factors for 2025 and the projected decarbonisation of the electricity grid, the link would avoid about 48,000 tonnes of carbon dioxide equivalent per year by 2035 under the central scenario. Construction emissions for Option B are estimated at 410,000 tonnes, giving a carbon payback period of approximately nine years after opening."),
    ("h1", "7 Economic Appraisal"),
    ("p", "The economic appraisal follows the national transport appraisal guidelines, using a 4 percent real discount rate and a 50-year appraisal period. Benefits include reduced road congestion, lower freight transport costs for shippers, fewer road crashes involving heavy vehicles, lower pavement maintenance costs on State Highway 9 and reduced emissions. Under the central scenario, Option B delivers present-value benefits of $2.21 billion against present-value costs of $1.35 billion, giving a benefit-cost ratio of 1.64. The equivalent ratios are 1.52 for Option A and 1.19 for Option C."),
    ("p", "Sensitivity tests show that Option B remains economically viable in all but the low demand scenario, where its ratio falls to 1.08. A 30 percent increase in capital costs would reduce the ratio to 1.31. The single most important assumption is the rail mode share: if fewer than about 18 percent of port containers bound for Millford Junction move by rail, the benefits no longer exceed the costs. For this reason we recommend that the LRTA seek early commitments from the port company and the major shippers regarding terminal access and rail pricing."),
    ("h1", "8 Risks and Opportunities"),
    ("ul", [
        "Geotechnical risk: the Eastern Valley contains areas of soft alluvial clay near the Tamsin river crossing; ground improvement has been allowed for, but further investigation is needed.",
        "Land acquisition: Option B requires the purchase of about 210 hectares from 64 landowners; delays in acquisition are the most likely cause of programme slippage.",
        "Demand risk: a proposed inland port at Ashby, 90 kilometres to the south, could draw container volumes away from Millford Junction if that project proceeds.",
        "Opportunity: the new alignment could be designed to permit future passenger services between Carver Bay and Millford with modest additional investment in stations and signalling.",
    ]),
    ("h1", "9 Implementation Timeline"),
    ("p", "If the LRTA board endorses the recommendation at its meeting on 18 September 2025, we propose the following programme. Detailed design and the full environmental impact assessment would run from early 2026 to mid-2027. Statutory approvals and land acquisition would follow, with a target of securing all consents by the end of 2027. Construction could then begin in the first quarter of 2028 and take about four years, with the first revenue trains running in 2032. The critical path runs through the environmental approval for the Tamsin river crossing, which requires a full season of fish migration surveys."),
    ("h1", "10 Recommendations"),
    ("ol", [
        "Adopt Option B, the Eastern Valley alignment, as the preferred option for further development.",
        "Commission detailed design and a full environmental impact assessment, with a budget of $38 million.",
        "Begin negotiations with the Port of Carver Bay company on the location and operation of the port rail terminal.",
        "Establish a freight customer working group to secure early commitments on rail volumes.",
        "Protect the Option B corridor from incompatible development through an amendment to the regional land-use plan.",
    ]),
]


def build_long_report_pdf() -> bytes:
    styles = _pdf_styles(body_font="Times-Roman", body_size=11.5)
    return _simple_pdf(_flowables(REPORT_BLOCKS, styles), title="Lakeshore Regional Freight Rail Feasibility Study", pagesize=LETTER, margin=25 * mm)


# --------------------------------------------------------------------------------------
# Office documents (docx, pptx, xlsx) are zip packages; they are rewritten with sorted
# entries, fixed timestamps and fixed core-property dates so reruns are byte-identical.
# --------------------------------------------------------------------------------------

_CORE_DATE = re.compile(rb"(<dcterms:(created|modified)[^>]*>)[^<]*(</dcterms:\2>)")


def normalize_ooxml(package: bytes) -> bytes:
    with zipfile.ZipFile(io.BytesIO(package)) as src:
        entries = {name: src.read(name) for name in src.namelist()}
    if "docProps/core.xml" in entries:
        entries["docProps/core.xml"] = _CORE_DATE.sub(rb"\g<1>" + FIXED_W3CDTF.encode() + rb"\g<3>", entries["docProps/core.xml"])
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for name in sorted(entries):
            info = zipfile.ZipInfo(name, date_time=ZIP_EPOCH)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 0
            info.external_attr = 0
            dst.writestr(info, entries[name], compresslevel=9)
    return out.getvalue()


def _set_core_properties(props, title: str) -> None:
    props.title = title
    props.author = AUTHOR
    props.last_modified_by = AUTHOR
    props.created = FIXED_DATETIME
    props.modified = FIXED_DATETIME
    props.comments = "kb-ray golden test document"
    props.revision = 1


def _saved(document) -> bytes:
    buf = io.BytesIO()
    document.save(buf)
    return normalize_ooxml(buf.getvalue())


# --------------------------------------------------------------------------------------
# policy.docx
# --------------------------------------------------------------------------------------

POLICY_EQUIPMENT = [
    ["Item", "Standard model", "Replacement cycle", "Asset tag prefix"],
    ["Laptop", "Corvo Book 14 Pro (32 GB RAM)", "4 years", "HL-LT"],
    ["Monitor", "Veyra 27-inch 4K USB-C", "6 years", "HL-MN"],
    ["Docking station", "Corvo USB-C Dock Gen 2", "5 years", "HL-DK"],
    ["Headset", "Auralis Duo 65 wireless", "3 years", "HL-HS"],
    ["Keyboard and mouse", "Corvo Silent Desktop Set", "4 years", "HL-KM"],
]

POLICY_SECURITY = [
    ("Devices", [
        "Only company-managed devices may be used to access Harbourline systems.",
        "Devices must be locked whenever they are left unattended, including at home.",
        "Full-disk encryption and automatic updates must never be disabled.",
    ]),
    ("Networks", [
        "Public Wi-Fi may only be used with the company VPN (HarbourConnect) switched on.",
        "Home routers must use WPA2 or WPA3 encryption and a non-default administrator password.",
    ]),
    ("Information", [
        "Printed documents containing customer or personal data must be shredded, never placed in household recycling.",
        "Video calls about confidential matters must not be held in public places such as cafés or trains.",
    ]),
]

POLICY_REQUEST_STEPS = [
    "Discuss the proposed working pattern with your line manager.",
    "Complete the remote work request form (HR-F-022) in the HR portal, including your home workplace address.",
    "Complete the online workstation self-assessment and the 30-minute security awareness module.",
    "Your manager approves or declines the request within 10 working days; a declined request must include written reasons.",
    "Once the request is approved, order your equipment through the IT portal; standard items are delivered within 5 working days.",
]


def _docx_table(document, rows: list[list[str]]) -> None:
    table = document.add_table(rows=len(rows), cols=len(rows[0]))
    table.style = "Table Grid"
    for r, values in enumerate(rows):
        for c, value in enumerate(values):
            cell = table.cell(r, c)
            cell.text = value
            if r == 0:
                cell.paragraphs[0].runs[0].bold = True


def build_policy_docx() -> bytes:
    import docx

    d = docx.Document()
    _set_core_properties(d.core_properties, "Remote Work and Equipment Policy")
    d.add_heading("Remote Work and Equipment Policy", level=0)
    d.add_paragraph("Harbourline Logistics B.V. — Policy HR-POL-014, version 3.1, effective 1 September 2025. Policy owner: People Operations. Approved by Sanne de Vries, Chief People Officer.")
    d.add_heading("1 Purpose", level=1)
    d.add_paragraph("This policy sets out when Harbourline employees may work away from a company office, what equipment the company provides for remote work, and the security and health requirements that apply. It replaces version 2.4 of the policy, issued in January 2023.")
    d.add_heading("2 Scope", level=1)
    d.add_paragraph("The policy applies to all permanent and fixed-term employees of Harbourline Logistics B.V. and its subsidiaries in the Netherlands, Belgium and Germany. It does not apply to warehouse, driving or dock roles, which by their nature must be performed on site, or to contractors, whose arrangements are governed by their service agreements.")
    d.add_heading("3 Eligibility and working patterns", level=1)
    d.add_paragraph("Employees may work remotely for up to three days per week once they have completed their probation period, subject to their manager's approval. Teams must agree at least one common office day per week, known as the anchor day. Employees who work from a location outside their country of employment for more than 20 working days in a calendar year need prior approval from People Operations and the Tax team, because such work can create tax and social security obligations.")
    d.add_heading("3.1 Core hours", level=2)
    d.add_paragraph("Remote employees must be available between 10:00 and 15:00 Central European Time on their working days and must keep their calendar status up to date.")
    d.add_heading("4 Equipment", level=1)
    d.add_heading("4.1 Company-provided equipment", level=2)
    d.add_paragraph("Every eligible employee receives the standard equipment set listed in the table below. Equipment remains the property of Harbourline and must be returned within 10 working days of leaving the company.")
    _docx_table(d, POLICY_EQUIPMENT)
    d.add_heading("4.2 Home office allowance", level=2)
    d.add_paragraph("Employees who work remotely at least two days per week receive a one-time home office allowance of €450 for furniture such as a desk or an ergonomic chair, and a monthly internet and utilities allowance of €35, paid with the monthly salary. Receipts for the one-time allowance must be submitted through the expenses system within 90 days of purchase.")
    d.add_heading("5 Information security", level=1)
    d.add_paragraph("Remote work must meet the same security standards as work in the office. In particular:")
    for topic, rules in POLICY_SECURITY:
        d.add_paragraph(topic, style="List Bullet")
        for rule in rules:
            d.add_paragraph(rule, style="List Bullet 2")
    d.add_paragraph("Suspected security incidents, including a lost or stolen device, must be reported to the IT Service Desk on extension 4400 within one hour of discovery.")
    d.add_heading("6 Requesting remote work", level=1)
    for step in POLICY_REQUEST_STEPS:
        d.add_paragraph(step, style="List Number")
    d.add_heading("7 Health and safety", level=1)
    d.add_paragraph("Employees are responsible for keeping their home workspace safe and ergonomic. People Operations will arrange a free remote ergonomic assessment on request, and employees with a medical condition may request additional equipment through the occupational health service.")
    d.add_heading("8 Review", level=1)
    d.add_paragraph("This policy is reviewed every two years, or earlier if legislation changes. The next scheduled review is in September 2027. Questions about this policy should be sent to People Operations at people@harbourline.example.")
    return _saved(d)


# --------------------------------------------------------------------------------------
# slides.pptx
# --------------------------------------------------------------------------------------

SLIDE_BULLETS = [
    ("Where we are", [
        (0, "Helios BMS 3.x is deployed in 14,200 residential storage units across 9 countries"),
        (0, "Field failure rate fell to 0.18% (target: below 0.25%)"),
        (0, "Average state-of-charge estimation error: 1.9%, down from 3.1% in Q1"),
        (0, "Top customer request: faster cell balancing for 48 V packs"),
        (1, "Requested by 6 of our 10 largest installers"),
    ]),
    ("Q3 milestones", [
        (0, "Delivered: active balancing hardware rev B (part HB-AB-220) passed UL 1973 pre-compliance"),
        (0, "Delivered: cloud telemetry pipeline now ingests 2.3 million readings per hour"),
        (0, "Slipped: CAN-FD support moved from Q3 to Q4 because of a transceiver shortage"),
        (0, "Retired: the 24 V Helios Mini product line reaches end of life on 31 March 2026"),
    ]),
]

SLIDE_RELEASES = [
    ["Version", "Target date", "Key features", "Status"],
    ["3.4.0", "15 Oct 2025", "Adaptive SoC model, faster balancing", "In validation"],
    ["3.5.0", "12 Dec 2025", "CAN-FD, secure boot v2", "In development"],
    ["4.0.0", "20 Mar 2026", "LFP-HD cell chemistry support", "Planned"],
    ["4.1.0", "30 Jun 2026", "Fleet-level predictive maintenance", "Proposed"],
]

SLIDE_NEXT_STEPS = [
    (0, "Risk: single-source supply of the AFE chip (Nexa AFE-18); second-source qualification starts in November"),
    (0, "Risk: certification lab capacity for UL 9540A testing is booked until February"),
    (0, "Next: approve the 4.0.0 scope at the steering committee on 21 October"),
    (0, "Next: hire two firmware engineers for the Eindhoven team"),
]


def _fill_bullets(text_frame, bullets: list[tuple[int, str]]) -> None:
    text_frame.text = bullets[0][1]
    for level, text in bullets[1:]:
        paragraph = text_frame.add_paragraph()
        paragraph.text = text
        paragraph.level = level


def build_slides_pptx() -> bytes:
    from pptx import Presentation
    from pptx.util import Inches, Pt

    prs = Presentation()
    _set_core_properties(prs.core_properties, "Helios BMS: Q3 2025 Roadmap Review")
    title_slide = prs.slides.add_slide(prs.slide_layouts[0])
    title_slide.shapes.title.text = "Helios BMS: Q3 2025 Roadmap Review"
    title_slide.placeholders[1].text = "Battery Systems Group — Lena Park, Product Manager — 7 October 2025"
    for title, bullets in SLIDE_BULLETS:
        slide = prs.slides.add_slide(prs.slide_layouts[1])
        slide.shapes.title.text = title
        _fill_bullets(slide.placeholders[1].text_frame, bullets)
    table_slide = prs.slides.add_slide(prs.slide_layouts[5])
    table_slide.shapes.title.text = "Firmware release plan"
    shape = table_slide.shapes.add_table(len(SLIDE_RELEASES), 4, Inches(0.5), Inches(1.8), Inches(9), Inches(3))
    for r, row in enumerate(SLIDE_RELEASES):
        for c, value in enumerate(row):
            shape.table.cell(r, c).text = value
    last = prs.slides.add_slide(prs.slide_layouts[5])
    last.shapes.title.text = "Risks and next steps"
    box = last.shapes.add_textbox(Inches(0.7), Inches(1.8), Inches(8.6), Inches(3.6))
    box.text_frame.word_wrap = True
    _fill_bullets(box.text_frame, SLIDE_NEXT_STEPS)
    contact = last.shapes.add_textbox(Inches(0.7), Inches(6.6), Inches(8.6), Inches(0.5))
    contact.text_frame.text = "Contact: lena.park@helios-bms.example"
    contact.text_frame.paragraphs[0].runs[0].font.size = Pt(12)
    return _saved(prs)


# --------------------------------------------------------------------------------------
# inventory.xlsx
# --------------------------------------------------------------------------------------

PARTS_SHEET = [
    ["Part Number", "Description", "Category", "Qty on Hand", "Unit Cost (USD)", "Bin Location", "Reorder Point", "Supplier ID", "Last Counted"],
    ["KA-1001", "Pitot-static tube heater element", "Sensors", 14, 212.50, "A-01-03", 5, "SUP-01", datetime(2025, 3, 4)],
    ["KA-1002", "Altitude encoder module", "Instruments", 6, 845.00, "A-02-01", 3, "SUP-03", datetime(2025, 3, 4)],
    ["KA-1017", "Fuel quantity probe, 18 in", "Sensors", 9, 389.75, "A-01-07", 4, "SUP-02", datetime(2025, 3, 5)],
    ["KA-1024", "VHF antenna, blade type", "Antennas", 11, 156.20, "B-03-02", 4, "SUP-01", datetime(2025, 3, 5)],
    ["KA-1033", "Transponder coax cable assembly, 2 m", "Cabling", 40, 38.90, "B-05-11", 15, "SUP-04", datetime(2025, 3, 6)],
    ["KA-1048", "Attitude indicator gyro rotor", "Instruments", 3, 1275.00, "A-02-05", 2, "SUP-09", datetime(2025, 3, 6)],
    ["KA-1052", "Circuit breaker, 5 A push-pull", "Electrical", 120, 24.15, "C-01-01", 50, "SUP-07", datetime(2025, 3, 7)],
    ["KA-1059", "Circuit breaker, 10 A push-pull", "Electrical", 85, 26.40, "C-01-02", 40, "SUP-07", datetime(2025, 3, 7)],
    ["KA-1066", "Landing light LED assembly", "Lighting", 7, 498.00, "C-04-06", 3, "SUP-05", datetime(2025, 3, 10)],
    ["KA-1071", "Strobe power supply, 28 V", "Lighting", 4, 612.30, "C-04-08", 2, "SUP-05", datetime(2025, 3, 10)],
    ["KA-1085", "ELT battery pack, lithium", "Emergency", 10, 174.60, "D-02-01", 6, "SUP-08", datetime(2025, 3, 11)],
    ["KA-1092", "Magnetic compass, panel mount", "Instruments", 5, 289.00, "A-02-09", 2, "SUP-06", datetime(2025, 3, 11)],
]

SUPPLIERS_SHEET = [
    ["Supplier ID", "Company", "Country", "Contact Name", "Email", "Lead Time (days)", "Quality Rating", "Approved Since"],
    ["SUP-01", "Northwind Avionics Supply", "United States", "Carla Mendes", "orders@northwind-avionics.example", 7, "A", 2016],
    ["SUP-02", "Baltic Aero Components", "Lithuania", "Tomas Jankauskas", "sales@balticaero.example", 21, "A", 2019],
    ["SUP-03", "Pacific Instrument Works", "Canada", "Hiro Tanaka", "hiro.tanaka@pacificinstrument.example", 14, "B", 2018],
    ["SUP-04", "Meridian Cable and Harness", "United States", "Dana Whitfield", "dana@meridiancable.example", 5, "A", 2020],
    ["SUP-05", "Alpenlicht Aviation Lighting", "Austria", "Katrin Huber", "k.huber@alpenlicht.example", 28, "B", 2021],
    ["SUP-06", "Southern Cross Aero Spares", "Australia", "Liam O'Connor", "liam@southerncrossaero.example", 35, "C", 2022],
    ["SUP-07", "Kestrel Electrical Distributors", "United States", "Marcus Bell", "mbell@kestrelelectrical.example", 3, "A", 2015],
    ["SUP-08", "Lumen Safety Systems", "France", "Élodie Marchand", "e.marchand@lumensafety.example", 18, "A", 2017],
    ["SUP-09", "Dakota Gyro Overhaul", "United States", "Ray Castillo", "service@dakotagyro.example", 30, "B", 2023],
]


def _fill_sheet(ws, rows: list[list], widths: list[int]) -> None:
    from openpyxl.styles import Font
    from openpyxl.utils import get_column_letter

    for row in rows:
        ws.append(row)
    for cell in ws[1]:
        cell.font = Font(bold=True)
    for i, width in enumerate(widths, start=1):
        ws.column_dimensions[get_column_letter(i)].width = width
    ws.freeze_panes = "A2"


def build_inventory_xlsx() -> bytes:
    from openpyxl import Workbook

    wb = Workbook()
    props = wb.properties
    props.title, props.creator, props.lastModifiedBy = "Kestrel Avionics parts inventory", AUTHOR, AUTHOR
    props.created = props.modified = FIXED_DATETIME
    parts = wb.active
    parts.title = "Parts"
    _fill_sheet(parts, PARTS_SHEET, [12, 36, 13, 12, 15, 13, 13, 12, 13])
    for row in parts.iter_rows(min_row=2):
        row[4].number_format = "#,##0.00"
        row[8].number_format = "yyyy-mm-dd"
    suppliers = wb.create_sheet("Suppliers")
    _fill_sheet(suppliers, SUPPLIERS_SHEET, [12, 32, 15, 18, 38, 16, 14, 15])
    return _saved(wb)


# --------------------------------------------------------------------------------------
# Text formats: HTML, Markdown, plain text (English and Vietnamese).
# --------------------------------------------------------------------------------------

FAQ_HTML = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>CycleLink Port Alder — Frequently Asked Questions</title>
</head>
<body>
  <header>
    <p class="logo">CycleLink Port Alder</p>
    <p class="tagline">Bike share for the City of Port Alder since 2017</p>
  </header>
  <nav>
    <ul>
      <li><a href="/">Home</a></li>
      <li><a href="/plans">Plans &amp; Pricing</a></li>
      <li><a href="/map">Station Map</a></li>
      <li><a href="/faq">FAQ</a></li>
      <li><a href="/contact">Contact</a></li>
    </ul>
  </nav>
  <main>
    <h1>Frequently Asked Questions</h1>
    <p>CycleLink operates 1,200 bikes at 148 docking stations across Port Alder, from the Harbourfront to the University district. This page answers the questions our customer service team hears most often. If your question is not covered here, call us or use the chat in the CycleLink app.</p>

    <h2>Membership and passes</h2>
    <h3>What passes are available?</h3>
    <p>You can pay per ride or buy a pass. Passes include unlimited rides up to the included ride time; longer rides are charged per extra minute. All prices include sales tax.</p>
    <table>
      <thead>
        <tr><th>Plan</th><th>Price</th><th>Included ride time</th><th>Extra time</th></tr>
      </thead>
      <tbody>
        <tr><td>Single Ride</td><td>$3.50</td><td>30 minutes</td><td>$0.25 per minute</td></tr>
        <tr><td>Day Pass</td><td>$12.00</td><td>Unlimited 45-minute rides for 24 hours</td><td>$0.20 per minute</td></tr>
        <tr><td>Monthly</td><td>$24.00</td><td>Unlimited 45-minute rides</td><td>$0.15 per minute</td></tr>
        <tr><td>Annual</td><td>$189.00</td><td>Unlimited 60-minute rides</td><td>$0.15 per minute</td></tr>
      </tbody>
    </table>
    <h3>Are there discounts?</h3>
    <p>Yes. Residents enrolled in the city's Access Port Alder program pay $5 per month for a Monthly pass, and full-time students with a valid college ID receive 30% off the Annual pass. Employers in the Commute Partners program can buy Annual passes for their staff at $149 each.</p>

    <h2>Riding</h2>
    <h3>How do I unlock a bike?</h3>
    <ol>
      <li>Open the CycleLink app and sign in, or tap your CycleLink key fob on the dock reader.</li>
      <li>Scan the QR code on the handlebar, or enter the five-digit bike number shown on the rear fender.</li>
      <li>Wait for the dock light to turn green, then pull the bike firmly backwards out of the dock.</li>
      <li>Adjust the seat using the quick-release lever before you set off.</li>
    </ol>
    <h3>What are the riding rules?</h3>
    <ul>
      <li>Riders must be at least 16 years old; riders aged 16 and 17 must wear a helmet under city ordinance 12-408.</li>
      <li>Do not ride on sidewalks in the downtown core between Front Street and 9th Avenue.</li>
      <li>One account can rent up to two bikes at the same time, for example for a rider and a guest.</li>
      <li>Bikes must not be taken across the Alder River ferry or onto light rail trains.</li>
    </ul>
    <h3>Are there electric bikes?</h3>
    <p>Yes. 350 of the 1,200 bikes in the fleet are pedal-assist e-bikes with a top assisted speed of 18 mph. E-bikes carry a surcharge of $0.10 per minute on every plan, and their battery level is shown in the app before you unlock.</p>

    <h2>Billing and problems</h2>
    <h3>What if the station is full when I want to return a bike?</h3>
    <p>Tap "Station full" on the dock screen or in the app. You will receive 15 minutes of extra ride time at no charge, and the app will direct you to the nearest station with free docks.</p>
    <h3>How do I report a damaged bike?</h3>
    <p>Press the red wrench button on the dock within two minutes of returning the bike, or report it in the app under Help &gt; Report a problem. Reported bikes are locked out of service until a mechanic has inspected them, normally within 48 hours.</p>
    <h3>What happens if a bike is lost or stolen?</h3>
    <p>A ride that has not ended after 24 hours is treated as a lost bike. A fee of $1,200 for a classic bike or $2,500 for an e-bike is charged to the account, and refunded in full if the bike is recovered undamaged within 30 days. Please report a theft to the Port Alder Police Department and send us the case number.</p>
  </main>
  <footer>
    <p>&copy; 2025 CycleLink Port Alder, operated by Alder Mobility Partners LLC under contract with the City of Port Alder Department of Transportation.</p>
    <p>Customer service: 1-800-555-0199, 6 a.m. to 10 p.m. daily. <a href="/privacy">Privacy</a> · <a href="/terms">Terms of Use</a></p>
  </footer>
</body>
</html>
"""

GUIDE_MD = """# Orchard CLI: Getting Started Guide

Orchard is a command-line tool for managing configuration snapshots across fleets of edge devices such as retail kiosks, parking meters and industrial gateways. It captures a device's configuration as a signed snapshot, compares snapshots, and rolls them out to a fleet in controlled waves. This guide covers Orchard CLI version 2.4.1, released on 3 February 2025.

## Installation

### Requirements

Before installing, check that your workstation meets these requirements:

- Python 3.10 or newer
- One of the supported operating systems:
  - Ubuntu 22.04 or 24.04
  - Debian 12
  - macOS 13 (Ventura) or newer
- Network access to the Orchard control server on TCP port 7443
- An Orchard account with at least the `operator` role for the fleets you manage

### Installing with pip

Orchard is distributed as a Python package. We recommend installing it into its own virtual environment:

```bash
python3 -m venv ~/.orchard-venv
source ~/.orchard-venv/bin/activate
pip install orchard-cli==2.4.1
orchard --version
```

The last command should print `orchard 2.4.1 (build 7f3c2e1)`.

## Configuration

### The orchard.toml file

Orchard reads its settings from `orchard.toml` in the current directory, and then from `~/.config/orchard/orchard.toml`. Values in the current directory take precedence. A minimal configuration looks like this:

```toml
[server]
url = "https://orchard.example.internal:7443"
timeout_seconds = 20

[fleet]
default = "kiosks-eu-west"
max_parallel_pushes = 25
halt_threshold = 0.02
```

### Authentication

Run `orchard login` to obtain an access token. Tokens are valid for 30 days and are stored in the operating system keychain. In CI pipelines, set the `ORCHARD_TOKEN` environment variable instead; it overrides any stored token. Service tokens for CI are issued by your Orchard administrator and can be limited to a single fleet.

## Everyday commands

The commands below cover most day-to-day work. Every command accepts `--help` for the full list of options.

| Command | What it does | Example |
|---|---|---|
| `orchard init` | Creates `orchard.toml` in the current directory | `orchard init --fleet kiosks-eu-west` |
| `orchard snapshot create` | Captures the current configuration of one device | `orchard snapshot create --device KX-2231` |
| `orchard diff` | Shows the differences between two snapshots | `orchard diff snap-0412 snap-0419` |
| `orchard push` | Applies a snapshot to a fleet in waves | `orchard push snap-0419 --wave-size 10` |
| `orchard rollback` | Restores the previous snapshot on devices that failed | `orchard rollback --since 2h` |
| `orchard status` | Reports health check results for the latest push | `orchard status --watch` |

### Rolling out a change safely

Follow this sequence for any change that affects more than one device:

1. Create a snapshot from a known-good reference device.
2. Push the snapshot to a canary wave:
   - use `--wave-size 5` so that only five devices change;
   - wait at least 15 minutes and check `orchard status` for failed health checks.
3. Push to the remainder of the fleet with the default wave size of 25.
4. Keep the previous snapshot ID at hand until the change has been stable for 24 hours.

A push halts automatically when more than 2% of the devices in a wave report failed health checks. The threshold is set by `halt_threshold` in `orchard.toml`.

## Troubleshooting

### Error E1042: snapshot signature mismatch

The snapshot was modified after it was signed, or it was signed with a key that the control server does not trust. Recreate the snapshot with `orchard snapshot create`, and check with your administrator that your signing key has not been revoked.

### Error E2007: device unreachable

The device did not answer within `timeout_seconds`. Orchard retries three times at 30-second intervals before marking the device as unreachable. Devices that are unreachable are skipped, not rolled back, and are listed in the push report so you can retry them later with `orchard push --only-failed`.
"""

NOTES_TXT = """RIVERBEND COMMUNITY GARDEN - COMMITTEE MEETING NOTES

Date: Wednesday 9 April 2025, 7:00 pm to 8:45 pm
Location: Riverbend Library, Meeting Room 2
Present: Dolores Fenwick (chair), Samir Haddad (treasurer), Kath Brennan (secretary), Oliver Nwosu, Mei Lin Chow, Pat Gallagher
Apologies: Ruth Adeyemi

The minutes of the previous meeting, held on 12 March, were approved without changes. Dolores reported that the action from March to replace the broken padlock on the tool shed has been completed. The new combination has been sent to all plot holders by text message and must not be written on the noticeboard or shared with visitors.

Samir gave the treasurer's report. The garden account held $4,812.40 on 31 March. Plot fees for 2025 have been received from 41 of the 46 plot holders; the remaining five have been sent reminders and have until 30 April to pay. Fees remain at $60 for a full plot (3 m by 6 m) and $35 for a half plot. The largest expense since the last meeting was $1,145 for 8 cubic metres of compost from Greenway Soils, delivered on 22 March. The water bill for the first quarter was $96, slightly lower than last year because of the wet February.

Oliver reported on water and irrigation. The main standpipe next to plot 17 has been leaking at the joint since early March. Under the lease, repairs to the water supply are the responsibility of the city parks department, and Oliver has logged the fault with Marcus Webb at Parks, reference PK-25-0388. A plumber is expected within two weeks. The drip irrigation trial on plots 30 to 36 will start on 1 May, with the timer set to run from 6:00 am to 6:30 am every day. Oliver reminded everyone that hoses must never be left running unattended, and that the city usually introduces hosepipe restrictions in July, when only watering cans may be used.

Kath reported on the waiting list, which now has 23 names. The longest-waiting applicant joined the list in August 2023. Plots 12 and 38 have been given up by their holders and will be offered to the first two people on the list this week. The committee confirmed the existing rule on neglected plots: a plot that is not cultivated for more than eight weeks during the growing season receives a written warning, and it is reallocated if there is no improvement after a further four weeks. Kath will send warnings to the holders of plots 5 and 44, which have not been worked since last autumn.

Mei Lin presented quotes for three accessible raised beds at wheelchair height (75 cm), to be placed next to the main path near the gate so that members who use wheelchairs or cannot kneel can garden comfortably. Cedar and Sons quoted $2,340 for the three beds, including delivery and assembly; Hillside Timber quoted $1,980 but without assembly. After discussion, the committee voted five to one in favour of Hillside Timber, on condition that volunteers assemble the beds. Mei Lin will apply to the Riverbend Neighbourhood Fund, which offers grants of up to $2,500 for accessibility improvements. The deadline for applications is 30 April.

Pat is coordinating the spring open day, which will take place on Saturday 17 May from 10 am to 2 pm. The programme includes a seedling swap, a children's scarecrow competition judged by the library's children's librarian, and guided tours of the garden every hour. Proceeds from the plant sale will go to the raised-bed fund. Pat needs at least eight volunteers for two-hour shifts and will circulate a sign-up sheet by email. The committee also agreed a provisional date of Saturday 20 September for the harvest supper.

The committee discussed the communal compost bins. A rat was seen near bin 3 on 2 April. A pest control visit has been booked for 15 April, and bin 3 is closed until then. Kath will put up a notice reminding members that cooked food, meat, fish and dairy products must never go into the communal bins, and that fresh material should be covered with a layer of dry leaves or shredded cardboard.

Under any other business, Dolores reported that local beekeeper Tom Ashworth has offered to place two hives in the north-east corner of the garden, behind the fruit cage. He would maintain the hives himself and share some of the honey with the garden. Several members welcomed the idea because of the benefits for pollination, but Pat raised concerns about members or visitors with bee-sting allergies. The committee agreed to survey all plot holders before making a decision at the next meeting.

Action items: Samir to chase the five outstanding plot fees by 30 April. Oliver to follow up the standpipe repair with Marcus Webb and to set the drip irrigation timer before 1 May. Kath to offer plots 12 and 38, send warnings for plots 5 and 44, and put up the composting notice. Mei Lin to submit the Neighbourhood Fund application by 30 April. Pat to circulate the open day volunteer sheet. Dolores to prepare the beehive survey and send it to all plot holders by 20 April.

The next meeting will be held on Wednesday 14 May 2025 at 7:00 pm in Meeting Room 2 of the Riverbend Library. The meeting closed at 8:45 pm.
"""

VIETNAMESE_TXT = """Chè Thái Nguyên: Hướng dẫn ngắn về vùng chè nổi tiếng nhất Việt Nam

Thái Nguyên là một tỉnh trung du miền núi phía Bắc, cách Hà Nội khoảng 80 km về phía bắc. Từ lâu, vùng đất này đã được biết đến qua câu nói "Chè Thái, gái Tuyên", ca ngợi hương vị đặc biệt của chè nơi đây. Tổng diện tích chè của tỉnh hiện vào khoảng 22.500 héc-ta, trong đó hơn 21.000 héc-ta đang cho thu hoạch, với sản lượng chè búp tươi đạt trên 260.000 tấn mỗi năm.

Vùng chè nổi tiếng nhất là Tân Cương, thuộc thành phố Thái Nguyên, nằm dưới chân dãy núi Tam Đảo. Đất ở đây là đất feralit đỏ vàng, tầng canh tác dày và thoát nước tốt. Khí hậu có sự chênh lệch nhiệt độ lớn giữa ngày và đêm, cùng với sương mù vào buổi sáng, giúp búp chè tích lũy nhiều axit amin và tạo nên vị ngọt hậu đặc trưng. Ngoài Tân Cương, các vùng chè La Bằng (huyện Đại Từ), Trại Cài (huyện Đồng Hỷ) và Khe Cốc (huyện Võ Nhai) cũng rất được ưa chuộng.

Giống chè truyền thống là chè trung du lá nhỏ, được trồng ở đây từ đầu thế kỷ XX. Trong những năm gần đây, nông dân đã chuyển dần sang các giống mới như LDP1, TRI 777, Kim Tuyên và Phúc Vân Tiên, cho năng suất cao hơn và chất lượng ổn định hơn. Một nương chè thường được trồng với mật độ từ 16.000 đến 18.000 cây trên một héc-ta và có thể cho thu hoạch trong hơn 40 năm nếu được chăm sóc đúng cách.

Kỹ thuật hái chè quyết định phần lớn chất lượng thành phẩm. Người hái chỉ lấy "một tôm hai lá", tức là búp non ở đỉnh cùng hai lá non ngay bên dưới. Chè được hái vào buổi sáng sớm, khi sương vừa tan, và phải được chế biến ngay trong ngày để giữ màu xanh và hương thơm. Mỗi năm có từ 7 đến 8 lứa hái, tập trung từ tháng Ba đến tháng Mười. Chè hái vào vụ xuân thường được đánh giá cao nhất.

Quy trình chế biến chè xanh truyền thống gồm bốn bước chính: làm héo, sao diệt men, vò và sao khô. Chè được sao trong chảo gang hoặc tôn quay ở nhiệt độ khoảng 200 °C, sau đó vò bằng tay để cánh chè xoăn lại, rồi sao nhiều lần ở nhiệt độ thấp dần cho đến khi độ ẩm còn dưới 5%. Công đoạn cuối cùng, gọi là "lên hương", đòi hỏi kinh nghiệm lâu năm của người thợ. Trung bình cần khoảng 4,5 đến 5 kg chè búp tươi để làm ra 1 kg chè khô.

Để pha một ấm chè ngon, người Thái Nguyên thường dùng nước sôi để nguội xuống khoảng 80 đến 85 °C. Trước tiên tráng ấm bằng nước nóng, cho vào khoảng 5 gam chè cho một ấm nhỏ, rót nước lần đầu rồi đổ đi ngay để "đánh thức" chè. Lần pha thứ hai nên hãm từ 2 đến 3 phút. Nước chè ngon có màu xanh vàng sánh, vị chát nhẹ và ngọt hậu kéo dài.

Du khách có thể tham quan các đồi chè Tân Cương quanh năm, nhưng đẹp nhất là từ tháng Ba đến tháng Năm. Festival Trà Thái Nguyên được tổ chức lần đầu vào năm 2011 và đã trở thành dịp quảng bá lớn cho chè Việt Nam. Nhiều hợp tác xã trong vùng hiện đón khách đến trải nghiệm hái chè, sao chè và thưởng trà ngay tại nương.
"""


def _utf8(text: str) -> bytes:
    return unicodedata.normalize("NFC", text).encode("utf-8")


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------

BUILDERS = {
    "manual.pdf": build_manual_pdf,
    "two_column.pdf": build_two_column_pdf,
    "headers_footers.pdf": build_headers_footers_pdf,
    "no_headings.pdf": build_no_headings_pdf,
    "figure.pdf": build_figure_pdf,
    "long_report.pdf": build_long_report_pdf,
    "policy.docx": build_policy_docx,
    "slides.pptx": build_slides_pptx,
    "inventory.xlsx": build_inventory_xlsx,
    "faq.html": lambda: _utf8(FAQ_HTML),
    "guide.md": lambda: _utf8(GUIDE_MD),
    "notes.txt": lambda: _utf8(NOTES_TXT),
    "vietnamese.txt": lambda: _utf8(VIETNAMESE_TXT),
}


def generate(out_dir: Path) -> dict[str, str]:
    """Write every golden document into out_dir; return {file name: sha256}."""
    out_dir.mkdir(parents=True, exist_ok=True)
    digests = {}
    for name, build in BUILDERS.items():
        data = build()
        (out_dir / name).write_bytes(data)
        digests[name] = hashlib.sha256(data).hexdigest()
    return digests


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=SOURCES_DIR, help="output folder (default: golden/sources)")
    args = parser.parse_args()
    for name, digest in generate(args.out).items():
        print(f"{digest}  {name}")


if __name__ == "__main__":
    main()
