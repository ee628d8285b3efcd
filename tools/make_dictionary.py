#!/usr/bin/env python3
"""Generate Kura's English-Japanese dictionary data set as TSV (key<TAB>value).

Sources (Debian packages): WordNet 3.0 (`wordnet-base`) and EDICT (`edict`).
Each key is an English word or phrase; each value is a compact JSON array with one
entry object:

    [{"word": KEY, "pronunciation": "", "item": [{"label", "pos", "text"}, ...],
      "translation": [Japanese words], "related": [English words]}]

Items labelled "wn" are WordNet senses (gloss, relations, synset id); items labelled
"ed" are EDICT headwords whose English gloss normalises to the key. Records are written
in a deterministic pseudo-random order (BLAKE2b-64 of the key, as a hash database would
be filled) or, with --sorted, in key order; --limit N keeps the first N of that order.

Usage: python3 tools/make_dictionary.py OUT.tsv [--sorted] [--limit N]

Only the standard library is used, and the output is the same byte for byte on every run
(it does not depend on PYTHONHASHSEED). See tools/README.md for sizes and licences.
"""

import argparse
import collections
import hashlib
import json
import os
import re
import sys
import time

WORDNET_DIR = "/usr/share/wordnet"
EDICT_FILE = "/usr/share/edict/edict"

# WordNet file suffix -> the one-letter part of speech used inside the files.
WORDNET_FILES = (("noun", "n"), ("verb", "v"), ("adj", "a"), ("adv", "r"))
# Synset type letter -> the part-of-speech name shown in items ("s" is a satellite adjective).
SYNSET_POS = {"n": "noun", "v": "verb", "a": "adjective", "s": "adjective", "r": "adverb"}
# Tie-break between parts of speech with as many senses: this order.
POS_PRIORITY = "nvar"

# WordNet pointer symbols we show, with their label; the list order is the display order
# of the labels (see wninput(5WN) for the symbols).
POINTER_LABELS = (
    ("!", "antonym"), ("@", "hypernym"), ("@i", "hypernym"), ("~", "hyponym"),
    ("~i", "hyponym"), ("&", "similar"), ("#m", "holonym"), ("#s", "holonym"),
    ("#p", "holonym"), ("%m", "meronym"), ("%s", "meronym"), ("%p", "meronym"),
    ("*", "entailment"), (">", "cause"), ("=", "attribute"), ("+", "derivative"),
    ("\\", "pertainym"), ("<", "participle"), ("^", "also"), (";c", "domain"),
    (";r", "domain"), (";u", "domain"),
)
LABEL_OF_POINTER = dict(POINTER_LABELS)
RELATION_ORDER = ["synonym"] + list(dict.fromkeys(label for _, label in POINTER_LABELS))

# Caps that keep values realistic rather than exhaustive.
WORDS_PER_RELATION = 8
EDICT_ITEMS_PER_KEY = 12
TRANSLATIONS_PER_KEY = 8
RELATED_PER_KEY = 10

# EDICT part-of-speech tag prefixes -> names, first matching prefix wins ("num" before "n").
EDICT_POS_PREFIXES = (
    ("adj", "adjective"), ("adv", "adverb"), ("aux", "auxiliary"), ("conj", "conjunction"),
    ("cop", "copula"), ("ctr", "counter"), ("exp", "phrase"), ("int", "interjection"),
    ("num", "numeric"), ("pn", "pronoun"), ("pref", "prefix"), ("prt", "particle"),
    ("suf", "suffix"), ("n", "noun"), ("v", "verb"), ("unc", "misc"),
)
EDICT_POS_TAG = re.compile(
    r"^(adj(-[a-z]+)?|adv(-to)?|aux(-[a-z]+)?|conj|cop(-da)?|ctr|exp|int|iv|n(-[a-z]+)?|num|"
    r"pn|pref|prt|suf|unc|v[1-5][a-z]*(-[a-z]+)?|v[knrstiz](-[a-z]+)?)$"
)
# EDICT usage and field tags. Dialect tags end with ":". Any other "(...)" is gloss text.
EDICT_MISC_TAGS = frozenset(
    "abbr anat arch archit astron ateji baseb biochem biol bot Buddh bus chem chn Christn "
    "col comp dated derog econ engr fam fem finc food gikun geol genet hanaf hist hob hon "
    "hum iK id ik io joc law ling litf m-sl MA mahj male math med mil music net-sl obs obsc "
    "oK ok on-mim phil physics physiol poet pol proverb rare sens Shinto shogi sl sports "
    "sumo tradem uk vidg vulg yoji zool aviat".split()
)
# Entries whose first field carries one of these are outdated or irregular spellings.
EDICT_SKIPPED = frozenset({"ok", "oK", "ik", "iK", "io"})
# Usage tags that push a headword down the ranking.
EDICT_DEMOTING = frozenset({"arch", "obs", "obsc", "rare", "sl", "vulg", "derog", "m-sl"})

EDICT_LINE = re.compile(r"^(\S+)(?: \[([^\]]+)\])? /(.*)/$")
LEADING_TAGS = re.compile(r"^\(([A-Za-z0-9:,-]+)\)\s*")
TRAILING_PARENS = re.compile(r"(\s*\([^()]*\))+$")
GLOSS_KEY_SHAPE = re.compile(r"[A-Za-z][A-Za-z0-9'.-]*( [A-Za-z0-9'.-]+){0,3}")
GLOSS_KEY_REJECT = re.compile(r"\b(e\.g|i\.e|etc|esp|usu|lit|something|someone|somebody)\b|\.$")
GLOSS_KEY_MAX_CHARS = 40
WORDNET_MARKER = re.compile(r"\((a|p|ip)\)$")


def require(path, package):
    if not os.path.isfile(path):
        sys.exit(f"error: {path} not found; install the Debian package '{package}' "
                 f"(apt-get install {package})")


def readable(lemma):
    """WordNet writes phrases with underscores: capital_of_Japan -> capital of Japan."""
    return lemma.replace("_", " ")


# ---------------------------------------------------------------- WordNet

class WordNet:
    """The synsets of WordNet plus each lemma's sense ranking from the index files."""

    def __init__(self, directory):
        self.synsets = {}       # (pos letter, offset) -> (type, words, pointers, gloss)
        self.sense_rank = {}    # (pos letter, lowercase lemma, offset) -> rank in the index
        for suffix, pos in WORDNET_FILES:
            self._read_index(f"{directory}/index.{suffix}", pos)
            self._read_data(f"{directory}/data.{suffix}", pos)

    def _read_index(self, path, pos):
        with open(path, encoding="ascii") as lines:
            for line in lines:
                if line.startswith(" "):  # the licence text at the top
                    continue
                fields = line.split()
                synset_count = int(fields[2])
                for rank, offset in enumerate(fields[len(fields) - synset_count:]):
                    self.sense_rank[(pos, fields[0], offset)] = rank

    def _read_data(self, path, pos):
        with open(path, encoding="ascii") as lines:
            for line in lines:
                if line.startswith(" "):
                    continue
                head, gloss = line.split(" | ", 1)
                fields = head.split()
                word_count = int(fields[3], 16)
                words = [WORDNET_MARKER.sub("", w) for w in fields[4:4 + 2 * word_count:2]]
                at = 4 + 2 * word_count
                pointers = []
                for p in range(at + 1, at + 1 + 4 * int(fields[at]), 4):
                    symbol, target, target_pos, source_target = fields[p:p + 4]
                    pointers.append((symbol, target, "a" if target_pos == "s" else target_pos,
                                     int(source_target[:2], 16), int(source_target[2:], 16)))
                self.synsets[(pos, fields[0])] = (fields[2], words, pointers, gloss.strip())

    def senses_by_key(self):
        """{key: [(item, synonyms), ...]}: the part of speech with most senses first, then
        WordNet's frequency rank."""
        senses = collections.defaultdict(list)
        for (pos, offset), (_, words, _, _) in self.synsets.items():
            for index, word in enumerate(words):
                rank = self.sense_rank.get((pos, word.lower(), offset), 99)
                senses[word].append((pos, rank, offset, index))
        result = {}
        for word, found in senses.items():
            per_pos = collections.Counter(s[0] for s in found)
            found.sort(key=lambda s: (-per_pos[s[0]], POS_PRIORITY.index(s[0]), s[1], s[2]))
            result[readable(word)] = [self._sense_item(pos, offset, index)
                                      for pos, _, offset, index in found]
        return result

    def _sense_item(self, pos, offset, index):
        """One sense of the word at `index` of the synset, as an item, plus its synonyms."""
        synset_type, words, pointers, gloss = self.synsets[(pos, offset)]
        synonyms = [readable(w) for i, w in enumerate(words) if i != index]
        relations = collections.defaultdict(list)
        if synonyms:
            relations["synonym"] = synonyms
        for symbol, target, target_pos, source, target_word in pointers:
            label = LABEL_OF_POINTER.get(symbol)
            # Lexical pointers (source != 0) belong to one word of the synset only.
            if label is None or source not in (0, index + 1):
                continue
            target_words = self.synsets[(target_pos, target)][1]
            name = readable(target_words[target_word - 1] if target_word else target_words[0])
            listed = relations[label]
            if name not in listed and len(listed) < WORDS_PER_RELATION:
                listed.append(name)
        parts = [gloss]
        parts += [f"[{label}]: " + ", ".join(relations[label])
                  for label in RELATION_ORDER if relations.get(label)]
        parts.append(f"[synset]: {offset}-{synset_type}")
        item = {"label": "wn", "pos": SYNSET_POS[synset_type], "text": " [-] ".join(parts)}
        return item, synonyms


# ---------------------------------------------------------------- EDICT

def gloss_to_key(gloss, is_verb):
    """The dictionary key an EDICT gloss stands for, or None if it makes a poor key."""
    text = TRAILING_PARENS.sub("", gloss).strip()   # "apple (fruit)" -> "apple"
    if is_verb and text.startswith("to "):
        text = text[3:]
    text = " ".join(text.split())
    if (len(text) > GLOSS_KEY_MAX_CHARS or not GLOSS_KEY_SHAPE.fullmatch(text)
            or GLOSS_KEY_REJECT.search(text)):
        return None
    return text


def edict_pos_name(tags):
    for tag in tags:
        for prefix, name in EDICT_POS_PREFIXES:
            if tag.startswith(prefix):
                return name
    return "misc"


def is_known_tag(tag):
    return (EDICT_POS_TAG.match(tag) is not None or tag.isdigit() or tag.endswith(":")
            or tag in EDICT_MISC_TAGS)


def split_senses(fields):
    """Groups the gloss fields of one entry into senses [(pos tags, misc tags, glosses,
    keys)], or returns None when the entry is an outdated spelling to skip."""
    senses = []
    pos_tags = ["unc"]
    for number, field in enumerate(fields):
        misc, field_pos, numbered = set(), [], False
        while True:
            tags = LEADING_TAGS.match(field)
            if not tags or not all(is_known_tag(t) for t in tags.group(1).split(",")):
                break
            for tag in tags.group(1).split(","):
                if EDICT_POS_TAG.match(tag):
                    field_pos.append(tag)
                elif tag.isdigit():
                    numbered = True   # "(1)", "(2)": a new sense starts
                else:
                    misc.add(tag)
            field = field[tags.end():]
        if number == 0 and misc & EDICT_SKIPPED:
            return None
        if field_pos:
            pos_tags = field_pos
        if field_pos or numbered or not senses:
            senses.append((pos_tags, set(), [], []))
        senses[-1][1].update(misc)
        if field.strip():
            is_verb = any(t.startswith("v") for t in pos_tags)
            senses[-1][2].append(field.strip())
            senses[-1][3].append(gloss_to_key(field, is_verb))
    return senses


def read_edict(path):
    """Inverts EDICT: {English key: [(rank, pos, display, word, glosses, keys)]}, where a
    smaller rank is a better headword (priority word, plain usage, first gloss and sense)."""
    with open(path, "rb") as raw:
        lines = raw.read().decode("euc_jp").split("\n")
    by_key = collections.defaultdict(list)
    for line in lines[1:]:   # the first line is the file's own header
        match = EDICT_LINE.match(line)
        if not match:
            continue
        kanji, kana, body = match.groups()
        fields = body.split("/")
        common = "(P)" in fields
        fields = [f for f in fields if f != "(P)" and not f.startswith("EntL")]
        senses = split_senses(fields)
        if senses is None:
            continue
        for sense_number, (pos_tags, misc, glosses, keys) in enumerate(senses):
            kana_first = "uk" in misc and kana   # "usually written in kana"
            word, reading = (kana, kanji) if kana_first else (kanji, kana)
            display = f"{word}【{reading}】" if reading and reading != word else word
            demotion = len(misc & EDICT_DEMOTING)
            pos = edict_pos_name(pos_tags)
            for gloss_number, key in enumerate(keys):
                if key:
                    rank = (not common, demotion, gloss_number > 0, sense_number,
                            len(glosses), len(word))
                    by_key[key].append((rank, pos, display, word, glosses, keys))
    return by_key


# ---------------------------------------------------------------- assembly

def unique(values):
    return list(dict.fromkeys(values))


def make_value(key, wordnet_senses, edict):
    items, related, translations = [], [], []
    for item, synonyms in wordnet_senses.get(key, []):
        items.append(item)
        related += synonyms
    shown = set()
    for _, pos, display, word, glosses, keys in sorted(edict.get(key, [])):
        if display in shown or len(shown) >= EDICT_ITEMS_PER_KEY:
            continue
        shown.add(display)
        text = display
        if any(k != key for k in keys):   # the sense means more than the key: show it
            text += " [-] " + "; ".join(glosses)
            related += [k for k in keys if k]
        items.append({"label": "ed", "pos": pos, "text": text})
        translations.append(word)
    if key in wordnet_senses:   # more translations: via synonyms of the first sense
        for synonym in wordnet_senses[key][0][1]:
            translations += [entry[3] for entry in sorted(edict.get(synonym, []))[:2]]
    entry = {
        "word": key,
        "pronunciation": "",
        "item": items,
        "translation": unique(translations)[:TRANSLATIONS_PER_KEY],
        "related": [r for r in unique(related) if r != key][:RELATED_PER_KEY],
    }
    return json.dumps([entry], ensure_ascii=False, separators=(",", ":"))


def hash_order(key):
    return hashlib.blake2b(key.encode(), digest_size=8).digest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out", help="the TSV file to write")
    parser.add_argument("--sorted", action="store_true", help="write in key order")
    parser.add_argument("--limit", type=int, default=0, help="write at most N records")
    args = parser.parse_args()

    for suffix, _ in WORDNET_FILES:
        require(f"{WORDNET_DIR}/index.{suffix}", "wordnet-base")
        require(f"{WORDNET_DIR}/data.{suffix}", "wordnet-base")
    require(EDICT_FILE, "edict")

    started = time.time()
    wordnet_senses = WordNet(WORDNET_DIR).senses_by_key()
    edict = read_edict(EDICT_FILE)
    # A gloss found only in EDICT becomes a key when two different headwords share it.
    edict = {k: v for k, v in edict.items()
             if k in wordnet_senses or len({e[2] for e in v}) >= 2}

    keys = sorted(set(wordnet_senses) | set(edict))
    if not args.sorted:
        keys.sort(key=hash_order)
    if args.limit > 0:
        keys = keys[:args.limit]

    record_bytes = value_bytes = 0
    temporary = args.out + ".tmp"
    with open(temporary, "wb") as out:
        for key in keys:
            k = key.encode()
            v = make_value(key, wordnet_senses, edict).encode()
            if re.search(rb"[\t\n\r]", k + v):
                sys.exit(f"error: a tab or newline in the record of {key!r}")
            out.write(b"%s\t%s\n" % (k, v))
            record_bytes += len(k) + len(v)
            value_bytes += len(v)
    os.replace(temporary, args.out)   # a half-written file never has the final name
    print(f"records={len(keys)} bytes(keys+values)={record_bytes} "
          f"avg_value={value_bytes / max(len(keys), 1):.1f} wn_keys={len(wordnet_senses)} "
          f"ed_keys={len(edict)} time={time.time() - started:.1f}s", file=sys.stderr)


if __name__ == "__main__":
    main()
