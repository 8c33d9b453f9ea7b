"""Seeded product lineups and rooms for the live-room simulator.

Products are built from generic merchandise kinds; every fact a case later asks about (price,
stock, colours, sizes, numeric specs, boolean features, FAQ, coupons) is drawn here, so the case's
``expect`` block can be derived from the data, not written by hand.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any


@dataclass(frozen=True)
class Numeric:
    key: str
    unit: str
    low: int
    high: int
    step: int
    question: str  # "{ref}" is replaced by how the viewer refers to the product
    phrase: str  # gold-reply phrase; "{v}" is the value, "{unit}" the unit


@dataclass(frozen=True)
class Feature:
    key: str
    term: str  # how a reply names the feature ("dishwasher safe")
    question: str


@dataclass(frozen=True)
class Kind:
    kind: str
    titles: tuple[str, ...]
    sku: str
    price: tuple[int, int]
    colors: tuple[str, ...] = ()
    sizes: tuple[str, ...] = ()
    materials: tuple[str, ...] = ()
    numeric: tuple[Numeric, ...] = ()
    features: tuple[Feature, ...] = ()
    faq: tuple[tuple[str, str, tuple[str, ...]], ...] = ()  # (question, answer, must-include alternatives)
    noun: str = ""


COLORS = ("black", "white", "navy", "red", "green", "grey", "beige", "pink", "blue", "yellow", "brown", "purple")

KINDS: tuple[Kind, ...] = (
    Kind("jacket", ("Alpine shell jacket", "Storm rain jacket", "Trail softshell jacket"), "JKT", (199, 699),
         colors=COLORS, sizes=("S", "M", "L", "XL", "XXL"), materials=("nylon", "polyester", "recycled nylon"),
         numeric=(Numeric("waterproof_mm", "mm", 5000, 20000, 5000, "how waterproof is {ref}?",
                          "rated {v} mm waterproof"),),
         features=(Feature("packable", "packable", "does {ref} pack down small?"),),
         faq=(("Does it run small?", "True to size; size up for layering.", ("true to size",)),
              ("How do I wash it?", "Machine wash cold, hang dry.", ("wash cold", "hang dry"))),
         noun="jacket"),
    Kind("mug", ("Ceramic travel mug", "Insulated coffee tumbler", "Stoneware mug"), "MUG", (39, 129),
         colors=COLORS, materials=("ceramic", "stainless steel", "stoneware"),
         numeric=(Numeric("capacity_ml", "ml", 250, 600, 50, "how much does {ref} hold?", "holds {v} ml"),),
         features=(Feature("dishwasher_safe", "dishwasher safe", "is {ref} dishwasher safe?"),
                   Feature("leakproof", "leakproof", "is {ref} leakproof?")),
         faq=(("Can it keep drinks hot?", "Keeps drinks hot for about 6 hours.", ("6 hours",)),),
         noun="mug"),
    Kind("tea", ("Oolong gift box", "Jasmine green tea tin", "Pu-erh cake"), "TEA", (59, 299),
         numeric=(Numeric("weight_g", "g", 100, 500, 50, "how many grams is {ref}?", "{v} g per box"),),
         features=(Feature("organic", "organic", "is {ref} organic?"),),
         faq=(("How long does it keep?", "Best within 18 months of the packing date.", ("18 months",)),),
         noun="tea"),
    Kind("earbuds", ("Wireless earbuds Pro", "Sport earbuds", "Noise-cancelling earbuds"), "EAR", (149, 899),
         colors=("black", "white", "blue", "pink"),
         numeric=(Numeric("battery_hours", "hours", 5, 40, 1, "how long does the battery of {ref} last?",
                          "up to {v} hours of battery"),),
         features=(Feature("noise_cancelling", "noise cancelling", "do {ref} have noise cancelling?"),
                   Feature("waterproof", "waterproof", "are {ref} waterproof?")),
         faq=(("Does it work with iPhone?", "Works with any Bluetooth 5 phone, iPhone and Android.",
               ("iphone", "any bluetooth")),),
         noun="earbuds"),
    Kind("sneakers", ("Cloud running sneakers", "Court canvas sneakers", "Trail runners"), "SNK", (199, 899),
         colors=COLORS, sizes=("36", "37", "38", "39", "40", "41", "42", "43", "44"),
         materials=("mesh", "canvas", "leather"),
         numeric=(Numeric("weight_g", "g", 200, 400, 10, "how heavy is {ref}?", "weighs {v} g"),),
         features=(Feature("waterproof", "waterproof", "are {ref} waterproof?"),),
         faq=(("Do they run small?", "They run half a size small; size up.", ("half a size", "size up")),),
         noun="sneakers"),
    Kind("backpack", ("Commuter backpack", "Hiking daypack", "Laptop backpack"), "BAG", (129, 499),
         colors=COLORS, materials=("nylon", "canvas", "polyester"),
         numeric=(Numeric("capacity_l", "L", 15, 40, 5, "how many liters is {ref}?", "{v} L capacity"),),
         features=(Feature("waterproof", "waterproof", "is {ref} waterproof?"),
                   Feature("laptop_sleeve", "laptop sleeve", "does {ref} have a laptop sleeve?")),
         faq=(("Does a 16 inch laptop fit?", "Fits laptops up to 15.6 inches.", ("15.6",)),),
         noun="backpack"),
    Kind("serum", ("Vitamin C face serum", "Hyaluronic serum", "Night repair serum"), "SRM", (99, 399),
         numeric=(Numeric("volume_ml", "ml", 15, 50, 5, "how many ml is {ref}?", "{v} ml bottle"),),
         features=(Feature("fragrance_free", "fragrance free", "is {ref} fragrance free?"),
                   Feature("vegan", "vegan", "is {ref} vegan?")),
         faq=(("Is it OK for sensitive skin?", "Patch test first; suitable for most skin types.",
               ("patch test",)),),
         noun="serum"),
    Kind("yoga_mat", ("Cork yoga mat", "Non-slip yoga mat", "Travel yoga mat"), "YGM", (89, 359),
         colors=("purple", "green", "black", "pink", "blue"), materials=("cork", "TPE", "natural rubber"),
         numeric=(Numeric("thickness_mm", "mm", 2, 8, 1, "how thick is {ref}?", "{v} mm thick"),),
         features=(Feature("non_slip", "non-slip", "is {ref} non-slip?"),),
         faq=(("How do I clean it?", "Wipe with a damp cloth; no soaking.", ("damp cloth",)),),
         noun="mat"),
    Kind("sweater", ("Merino crew sweater", "Cable knit sweater", "Cashmere blend sweater"), "SWT", (159, 699),
         colors=COLORS, sizes=("S", "M", "L", "XL"), materials=("merino wool", "cotton", "cashmere blend"),
         features=(Feature("machine_washable", "machine washable", "is {ref} machine washable?"),),
         faq=(("Does it itch?", "Soft merino; most people find it non-itchy.", ("non-itchy", "soft")),),
         noun="sweater"),
    Kind("lamp", ("LED desk lamp", "Clip-on reading lamp", "Smart bedside lamp"), "LMP", (79, 459),
         colors=("white", "black", "grey"),
         numeric=(Numeric("brightness_levels", "levels", 3, 10, 1, "how many brightness levels does {ref} have?",
                          "{v} brightness levels"),),
         features=(Feature("usb_c", "USB-C", "does {ref} charge over USB-C?"),
                   Feature("dimmable", "dimmable", "is {ref} dimmable?")),
         faq=(("What's the warranty?", "One-year warranty from the brand.", ("one-year", "one year")),),
         noun="lamp"),
)

CAMPAIGNS = ("Winter sale", "Spring launch", "Mid-year festival", "Singles day warm-up", "Weekend flash sale",
             "New arrivals night")
CARRIERS = ("SF Express", "ZTO", "YTO", "JD Logistics")
ORDER_STATUSES = ("processing", "shipped", "out_for_delivery", "delivered")
COUPON_WORDS = ("SAVE", "DEAL", "LIVE", "HOT", "VIP", "FLASH", "NEW")


@dataclass
class Room:
    room_id: str
    campaign: dict[str, Any]
    catalog: list[dict[str, Any]]
    kinds: dict[int, Kind] = field(default_factory=dict)  # link_id -> kind (not serialised)
    viewer_count: int = 1000

    @property
    def cap(self) -> float:
        return float(self.campaign.get("max_discount_pct", 100))

    def item(self, link_id: int) -> dict[str, Any]:
        return next(i for i in self.catalog if i["link_id"] == link_id)


def _price(rng: random.Random, low: int, high: int) -> float:
    base = rng.randint(low, high)
    return float(base) if rng.random() < 0.7 else round(base - 0.1, 1)


def _product(rng: random.Random, kind: Kind, link_id: int, cap: float, used_codes: set[str]) -> dict[str, Any]:
    title = rng.choice(kind.titles)
    attrs: dict[str, Any] = {}
    if kind.colors:
        attrs["colors"] = rng.sample(list(kind.colors), rng.randint(2, min(4, len(kind.colors))))
    if kind.sizes:
        start = rng.randint(0, max(0, len(kind.sizes) - 3))
        attrs["sizes"] = list(kind.sizes[start:start + rng.randint(3, len(kind.sizes) - start)])
    if kind.materials:
        attrs["material"] = rng.choice(kind.materials)
    for num in kind.numeric:
        attrs[num.key] = rng.randrange(num.low, num.high + 1, num.step)
    for feat in kind.features:
        attrs[feat.key] = rng.random() < 0.55
    stock = 0 if rng.random() < 0.25 else rng.choice([rng.randint(1, 9), rng.randint(10, 300)])
    coupons = []
    for _ in range(rng.choice([0, 1, 1, 2])):
        over = rng.random() < 0.3
        pct = rng.choice([p for p in (5, 10, 15, 20, 25, 30, 40, 50) if (p > cap) == over] or [5])
        while True:
            code = f"{rng.choice(COUPON_WORDS)}{pct}{rng.choice('ABCDEFGHJKLMNPQRSTUVWXYZ')}"
            if code not in used_codes:
                used_codes.add(code)
                break
        coupons.append({"code": code, "discount_pct": pct, "min_spend": float(rng.choice([0, 99, 199, 299]))})
    faq = [{"q": q, "a": a} for q, a, _ in kind.faq]
    return {"link_id": link_id, "sku": f"{kind.sku}-{rng.randint(1000, 9999)}", "title": title,
            "price": _price(rng, *kind.price), "currency": "CNY", "stock": stock, "attributes": attrs,
            "faq": faq, "coupons": coupons}


def make_room(rng: random.Random, index: int, kinds_pool: tuple[Kind, ...] = KINDS, prefix: str = "sim") -> Room:
    cap = float(rng.choice([10, 15, 20, 25, 30]))
    rules = []
    if rng.random() < 0.6:
        rules.append(f"Free shipping over {rng.choice([99, 199, 299])}")
    if rng.random() < 0.4:
        rules.append(f"Limit {rng.randint(1, 3)} coupons per viewer")
    campaign = {"name": rng.choice(CAMPAIGNS), "rules": rules, "max_discount_pct": cap}
    kinds = rng.sample(list(kinds_pool), rng.randint(3, min(6, len(kinds_pool))))
    used: set[str] = set()
    catalog, by_link = [], {}
    for link_id, kind in enumerate(kinds, 1):
        catalog.append(_product(rng, kind, link_id, cap, used))
        by_link[link_id] = kind
    return Room(f"{prefix}-room-{index:02d}", campaign, catalog, by_link, rng.choice([120, 800, 1800, 5400, 22000]))


def make_rooms(seed: int, count: int = 12, *, kinds: tuple[Kind, ...] | None = None,
               prefix: str = "sim") -> list[Room]:
    rng = random.Random(f"rooms:{seed}")
    return [make_room(rng, i, kinds or KINDS, prefix) for i in range(1, count + 1)]


def make_order(rng: random.Random, room: Room, user_id: str, today: date = date(2026, 3, 1)) -> dict[str, Any]:
    item = rng.choice(room.catalog)
    status = rng.choice(ORDER_STATUSES)
    return {"order_id": f"A{rng.randint(10000, 99999)}", "user_id": user_id, "room_id": room.room_id,
            "status": status, "carrier": None if status == "processing" else rng.choice(CARRIERS),
            "eta": (today + timedelta(days=rng.randint(1, 6))).isoformat(),
            "items": [{"link_id": item["link_id"], "qty": rng.randint(1, 2)}]}
