"""Text normalisation before screening and matching.

NFKC (full-width letters and digits, compatibility forms), look-alike letters from other scripts
mapped to Latin, zero-width characters removed, case folded, every run of whitespace (line breaks
included) collapsed to one space. :func:`deobfuscate` also undoes digit/symbol letter swaps ("1gn0re")
and letters split by separators ("i.g.n.o.r.e"), for screening only.
"""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

# Cyrillic and Greek letters that look like Latin ones (after NFKC and case folding).
_CONFUSABLES = str.maketrans({
    "а": "a", "в": "b", "е": "e", "ё": "e", "к": "k", "м": "m", "н": "h", "о": "o", "р": "p", "с": "c",
    "т": "t", "у": "y", "х": "x", "і": "i", "ї": "i", "ј": "j", "ѕ": "s", "ԁ": "d", "ɡ": "g", "һ": "h",
    "ԛ": "q", "ԝ": "w", "α": "a", "β": "b", "ε": "e", "ι": "i", "κ": "k", "ν": "v", "ο": "o", "ρ": "p",
    "τ": "t", "υ": "u", "χ": "x", "ω": "w", "ɑ": "a", "ı": "i", "ℓ": "l",
})
_INVISIBLE = re.compile("[\u00ad\u200b-\u200f\u2028\u2029\u202a-\u202e\u2060-\u2064\ufeff]")
_SPACE = re.compile(r"\s+")
_LEET = str.maketrans({"0": "o", "1": "i", "3": "e", "4": "a", "5": "s", "7": "t", "@": "a", "$": "s", "!": "i"})
_SPLIT_LETTERS = re.compile(r"\b(?:[a-z][.\-_*·]){2,}[a-z]\b")


# Pure functions of a text, cached: the policy reads the same comment and catalog strings several times a
# call and on every call of a request (bounded; the values are immutable strings).
@lru_cache(maxsize=4096)
def normalize(text: str) -> str:
    """NFKC, look-alikes to Latin, invisible characters removed, case folded, whitespace collapsed."""
    out = unicodedata.normalize("NFKC", text)
    out = _INVISIBLE.sub("", out).casefold().translate(_CONFUSABLES)
    return _SPACE.sub(" ", out).strip()


def deobfuscate(text: str) -> str:
    """:func:`normalize`, then letters split by dots or dashes joined and digit/symbol swaps inside
    words undone (a word that is all digits stays a number)."""
    out = _SPLIT_LETTERS.sub(lambda m: re.sub(r"[.\-_*·]", "", m.group(0)), normalize(text))
    return re.sub(r"\S+", lambda m: m.group(0) if not re.search(r"[a-z]", m.group(0)) else
                  m.group(0).translate(_LEET), out)


# Chat shorthand of everyday English (not of any product or template): expanded before reading intents.
SHORTHAND = {
    "u": "you", "r": "are", "ur": "your", "pls": "please", "plz": "please", "pleaseee": "please",
    "thx": "thanks", "ty": "thank you", "hw": "how", "wat": "what", "wht": "what", "hv": "have",
    "cud": "could", "shud": "should", "wud": "would", "gimme": "give me", "lemme": "let me",
    "wanna": "want to", "gonna": "going to", "dunno": "do not know", "cuz": "because", "coz": "because",
    "bc": "because", "rn": "right now", "tmr": "tomorrow", "2day": "today", "y": "why", "n": "and",
    "abt": "about", "avail": "available", "qty": "quantity", "pcs": "pieces", "hmu": "tell me",
    "ppl": "people", "w": "with", "msgs": "messages", "msg": "message", "pic": "picture", "pics": "pictures",
    "tho": "though", "bday": "birthday", "sz": "size", "diff": "difference", "btw": "by the way",
}
_TOKEN = re.compile(r"[a-z0-9]+")


@lru_cache(maxsize=4096)
def expand_shorthand(text: str) -> str:
    """:func:`normalize`, then common chat shorthand written out ("hw much r they" → "how much are they")."""
    return _TOKEN.sub(lambda m: SHORTHAND.get(m.group(0), m.group(0)), normalize(gloss(text)))


# Everyday Chinese shopping words with their English sense (a bilingual glossary of the domain, not of
# any product, template or test phrase). Live rooms are often Chinese: the English cues of intents and
# the lexical half of fact retrieval then read a Chinese comment too; the embedding half reads it as is.
GLOSSARY: dict[str, str] = {
    # asking
    "吗": "?", "呢": "?", "会不会": "will it ?", "能不能": "can it ?", "可不可以": "can i ?", "可以吗": "can i ?",
    "有没有": "is there any ?", "是不是": "is it ?", "怎么": "how ?", "什么": "what ?", "哪里": "where ?",
    "哪个": "which ?", "哪款": "which ?", "多久": "how long ?", "多大": "how big ?", "多长": "how long ?",
    "多重": "how heavy weight ?", "多厚": "how thick thickness ?", "多宽": "how wide width ?",
    "多高": "how tall height ?", "几": "how many ?", "哪年": "which year ?", "几个月": "how many months ?",
    # referring
    "这个": "this", "这款": "this", "那个": "that", "链接": "link", "号链接": "link", "上一个": "previous",
    "刚才": "earlier", "便宜的": "cheaper", "大的": "big", "小的": "small",
    # price
    "多少钱": "how much price", "价格": "price", "价钱": "price", "价": "price", "几块": "how much price",
    "贵": "expensive", "便宜": "cheaper price",
    # stock
    "有货": "in stock", "还有": "still have stock",
    "没了": "sold out", "库存": "stock", "没货": "sold out", "售罄": "sold out",
    "卖完": "sold out", "断货": "sold out", "补货": "restock", "剩": "left",
    # promotion
    "券": "coupon", "优惠": "discount deal", "折扣": "discount", "打折": "discount", "满减": "discount",
    "叠加": "stack combine coupons", "一起用": "together combine", "包邮": "free shipping", "运费": "shipping",
    "分期": "instalments", "免息": "interest-free instalments", "活动": "campaign deal",
    # buying
    "我要": "i want", "下单": "order buy", "加购": "add to cart",
    "购物车": "cart",
    # after the sale
    "订单": "my order", "发货": "ship shipped", "快递": "delivery", "物流": "tracking delivery",
    "签收": "delivered", "没收到": "not received", "到货": "arrive", "退货": "return", "退款": "refund",
    "换货": "exchange", "售后": "after-sales", "坏了": "broken", "破了": "broken damaged", "碎了": "broken",
    "烂了": "damaged", "地址": "address", "写错": "wrong", "填错": "wrong", "改": "change", "取消": "cancel",
    "能退": "return", "我拍的是": "wrong item i ordered", "我买的是": "wrong item i ordered", "退吗": "return",
    "退钱": "refund", "不转了": "not working", "坏": "broken", "漏了": "leaking", "发错": "wrong item",
    "到哪": "where is my delivery",
    "几天能到": "when will it arrive shipping", "什么时候到": "when will it arrive shipping",
    # facts
    "颜色": "colour", "尺码": "size", "码": "size", "尺寸": "size dimensions", "大小": "size", "材质": "material",
    "面料": "fabric material", "重量": "weight", "容量": "capacity", "电池": "battery", "续航": "battery life",
    "防水": "waterproof", "洗": "wash", "机洗": "machine wash", "拆": "removable", "产地": "origin",
    "哪里产": "origin made in", "保质期": "shelf life", "年份": "year", "保存": "keep store", "适合": "suitable for",
    "敏感肌": "sensitive skin", "皮肤": "skin", "电磁炉": "induction", "洗碗机": "dishwasher",
    "微波炉": "microwave", "飞机": "plane airline flight", "保温": "keep warm", "缩水": "shrink",
    "素的": "vegan vegetarian", "吃素": "vegan vegetarian",
    "掉色": "colour fade", "味道": "smell taste", "保修": "warranty", "质保": "warranty", "年龄": "age",
    "宝宝": "baby kid", "幼猫": "kitten", "小奶猫": "kitten", "成猫": "adult cat", "幼犬": "puppy",
    "能吃": "can eat", "调节": "adjust adjustable", "可调": "adjustable", "孩子": "kid child", "小孩": "kid child",
    "狗": "dog", "猫": "cat", "试用": "sample trial",
    "小样": "sample", "黑色": "black", "白色": "white", "红色": "red", "蓝色": "blue", "粉色": "pink",
    "绿色": "green", "灰色": "grey", "黄色": "yellow", "紫色": "purple", "米色": "beige", "棕色": "brown",
    # social
    "你好": "hello", "哈喽": "hello", "主播": "host", "谢谢": "thanks",
}
_GLOSS_RE = re.compile("|".join(sorted((re.escape(k) for k in GLOSSARY), key=len, reverse=True)))
CJK = re.compile(r"[\u4e00-\u9fff]")  # Chinese characters


@lru_cache(maxsize=4096)
def gloss(text: str) -> str:
    """The text, followed by the English sense of the Chinese shopping words in it (unchanged when it
    has no Chinese)."""
    if not CJK.search(text):
        return text
    senses = [GLOSSARY[m.group(0)] for m in _GLOSS_RE.finditer(text)]
    # "3号链接" / "链接3" / "3号" name a link by number
    senses += [f"link {n}" for n in re.findall(r"(\d{1,3})\s*号", text)]
    senses += [f"link {n}" for n in re.findall(r"链接\s*(\d{1,3})", text)]
    senses += [f"size {s}" for s in re.findall(r"([A-Za-z0-9]{1,4})\s*码", text)]
    return f"{text} {' '.join(senses)}" if senses else text
