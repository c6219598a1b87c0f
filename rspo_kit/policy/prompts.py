"""Per-step prompts with a compact memory, and the projection from a model reply to an action.

A tiny model sees only its prompt, so the prompt carries what a person would remember: for ALFWorld
where the agent is, what it holds (and whether it already heated, cooled or cleaned it), the objects
seen so far whose kind the task names (``Found:``, the note a person searching for a mug would keep),
and the receptacles of the room in order, each as ``?`` (not yet looked at), ``closed`` or what was
seen in it; for WebShop the queries tried, the items viewed and the option values chosen (the page
does not show them), and the page without its copy of the instruction.
Then the last ``k`` (action, observation) pairs (a result the next action left unchanged, such as a
page after choosing an option, as ``(unchanged)``), the current observation, the admissible actions,
and the task last.
Length is bounded: the oldest history goes first, then the action list; a prompt still over budget
has the middle of its current observation cut, its start and end kept (then, were that not enough,
the end of the memory, then of the task), so that the chat template, the ``Memory:`` line, the task
and the reply format stay in every prompt.
An env that registers no memory of its own (``register_env(..., memory=...)``) gets ``GenericMemory``:
the actions tried and whether the current observation was seen before.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise

from rspo_kit.envs.registry import env_memory
from rspo_kit.envs.webshop.pages import BACK_TO_SEARCH, BUY_NOW, NEXT_PAGE, PREV_PAGE, SUB_PAGES

# Words of the template, added to the tokenizer corpus so that prompts tokenize compactly.
TEMPLATE_WORDS = (
    "Task: ",
    "Memory: ",
    "At: ",
    "Holding: ",
    "Found: ",
    "nothing",
    "Recent: ",
    "Now: ",
    "Actions: ",
    "Queries: ",
    "Viewed: ",
    "Heard: ",
    "Reply with the next action only.",
    "Reply with <action>your action</action>.",
)

_LOOK = "Looking quickly around you, you see "
_ARRIVE = re.compile(r"^You arrive at (.+?)\. (.*)$", re.S)
_OPEN = re.compile(r"^You open the (.+?)\. (.*)$", re.S)
_PICK = re.compile(r"^You pick up the (.+?) from the (.+?)\.$")
_MOVE = re.compile(r"^You move the (.+?) to the (.+?)\.$")
_TREAT = re.compile(r"^You (heat|cool|clean) the (.+?) using the (.+?)\.$")
_TASK = re.compile(r"Your task is to: (.*?)(?:\n|$)")
_TREATED = {"heat": "hot", "cool": "cool", "clean": "clean"}


# Memory updates run on every observation, so they must stay linear in its length (an env may send
# a long or malformed one). Lazy groups that must reach the end of the text (``(.*?)\.$``) retry to
# the end at every candidate start and separator: quadratic or cubic in the length. The two helpers
# below find the same text with ``str.find``; the one-line patterns run only on one-line sentences.


def _room_list(observation: str) -> str | None:
    r"""The text after ``Looking quickly around you, you see`` up to the first ``.`` that ends a line.

    What ``re.search(r"Looking quickly around you, you see (.*?)\.(?:\n|$)", observation, re.S)``
    would capture, found in linear time.

    >>> _room_list("Looking quickly around you, you see a desk 1, and a bed 1.\n\nYour task is to: x.")
    'a desk 1, and a bed 1'
    """
    start = observation.find(_LOOK)
    if start < 0:
        return None
    begin = start + len(_LOOK)
    stop = observation.find(".\n", begin)
    if stop < 0 and observation.endswith(".") and len(observation) - 1 >= begin:
        stop = len(observation) - 1
    return observation[begin:stop] if stop >= 0 else None


def _contents_list(text: str) -> str | None:
    r"""The text after ``On the <receptacle>, you see`` or ``In it, you see`` up to the final ``.``.

    What ``re.search(r"(?:On the .+?, you see|In it, you see) (.*?)\.$", text, re.S)`` would
    capture, found in linear time: the final ``.`` is fixed, and the earliest start that reaches a
    ``, you see`` wins (a later ``On the`` only reaches the same ones or fewer).

    >>> _contents_list("On the desk 1, you see a mug 1, and a pen 2.")
    'a mug 1, and a pen 2'
    >>> _contents_list("The drawer 1 is open. In it, you see nothing.")
    'nothing'
    """
    end = len(text) - 1 if text.endswith(".") else len(text) - 2 if text.endswith(".\n") else -1
    starts = []
    if (on := text.find("On the ")) >= 0 and (see := text.find(", you see ", on + len("On the ") + 1)) >= 0:
        starts.append((on, see + len(", you see ")))
    if (in_it := text.find("In it, you see ")) >= 0:
        starts.append((in_it, in_it + len("In it, you see ")))
    if end < 0 or not starts:
        return None
    return text[min(starts)[1] : end]


def _one_line_sentence(text: str) -> bool:
    """Whether ``text`` is one line ending in ``.`` (a final newline allowed), as ``_PICK``,
    ``_MOVE`` and ``_TREAT`` need; checked first, it keeps their lazy groups from retrying."""
    line = text.removesuffix("\n")
    return line.endswith(".") and "\n" not in line


def _split_list(text: str) -> list[str]:
    """'a apple 1, a mug 2, and a fork 1' -> ['apple 1', 'mug 2', 'fork 1']."""
    if text.strip() == "nothing":
        return []
    items = re.split(r", and |, | and ", text.strip())
    return [re.sub(r"^(a|an|the) ", "", item.strip()) for item in items if item.strip()]


def object_kind(name: str) -> str:
    """'mug 3' -> 'mug'."""
    return name.rsplit(" ", 1)[0]


@dataclass(frozen=True)
class AlfworldMemory:
    """What the agent has seen of the room: receptacles in order, contents, location, inventory."""

    order: tuple[str, ...] = ()
    contents: dict[str, str] = field(default_factory=dict)  # receptacle -> "?", "closed" or "a, b"
    at: str = ""
    holding: str = ""
    treated: str = ""  # "hot", "cool" or "clean" once the held object was heated, cooled or cleaned
    task_words: frozenset[str] = frozenset()  # words of the task: object kinds worth noting

    def update(self, action: str, observation: str) -> AlfworldMemory:
        room, task = _room_list(observation), _TASK.search(observation)
        if room is not None and task:  # the opening observation: the room's receptacles, none looked at
            # yet (a later `look` from the middle of the room says "... you see nothing." and must not
            # wipe what was seen); a receptacle listed twice is kept once
            order = tuple(dict.fromkeys(_split_list(room)))
            words = frozenset(re.findall(r"[a-z]+", task.group(1).lower()))
            return AlfworldMemory(order, {r: "?" for r in order}, task_words=words)
        contents = dict(self.contents)
        at, holding, treated = self.at, self.holding, self.treated
        if m := _ARRIVE.match(observation) or _OPEN.match(observation):
            at, rest = m.group(1), m.group(2)
            if rest.startswith(f"The {at} is closed"):
                contents[at] = "closed"
            elif (listed := _contents_list(rest)) is not None:
                contents[at] = ", ".join(_split_list(listed)) or "nothing"
        elif not _one_line_sentence(observation):
            pass
        elif m := _PICK.match(observation):
            holding, rec, treated = m.group(1), m.group(2), ""
            left = [o for o in contents.get(rec, "").split(", ") if o and o != holding]
            contents[rec] = ", ".join(left) or "nothing"
        elif m := _MOVE.match(observation):
            obj, rec = m.group(1), m.group(2)
            have = [o for o in contents.get(rec, "").split(", ") if o and o not in ("nothing", "?", "closed")]
            contents[rec] = ", ".join([*have, obj])
            holding, treated = "", ""
        elif (m := _TREAT.match(observation)) and m.group(2) == holding:
            treated = _TREATED[m.group(1)]
        return replace(self, contents=contents, at=at, holding=holding, treated=treated)

    def found(self) -> list[str]:
        """'mug 3 in cabinet 2' for every object seen whose kind the task names, in room order."""
        return [
            f"{o} in {r}"
            for r in self.order
            for o in self.contents.get(r, "").split(", ")
            if o and object_kind(o) in self.task_words
        ]

    @staticmethod
    def show(observation: str, instruction: str) -> str:
        return observation

    def render(self) -> str:
        seen = "; ".join(f"{r}: {self.contents.get(r, '?')}" for r in self.order)
        holding = f"{self.holding} ({self.treated})" if self.holding and self.treated else self.holding
        found = ", ".join(self.found()) or "nothing"
        return f"At: {self.at or 'start'}. Holding: {holding or 'nothing'}. Found: {found}. {seen}"


_ASIN = re.compile(r"[a-z0-9]{10}")
_NOT_OPTIONS = {
    b.lower() for b in (BACK_TO_SEARCH, PREV_PAGE, NEXT_PAGE, BUY_NOW, *SUB_PAGES)
}  # the shop's buttons


@dataclass(frozen=True)
class WebShopMemory:
    """Queries tried, items viewed, and the option values chosen (the page does not show them)."""

    queries: tuple[str, ...] = ()
    viewed: tuple[str, ...] = ()
    chosen: tuple[str, ...] = ()  # option values clicked since the last search; kept across items

    def update(self, action: str, observation: str) -> WebShopMemory:
        a = action.strip().lower()
        if a.startswith("search[") and a.endswith("]"):
            return replace(self, queries=(*self.queries, a[7:-1])[-3:], chosen=())
        if not (a.startswith("click[") and a.endswith("]")):
            return self
        target = a[6:-1]
        if _ASIN.fullmatch(target):
            return replace(self, viewed=tuple(dict.fromkeys((*self.viewed, target)))[-5:])
        if target == BACK_TO_SEARCH.lower():  # the shop forgets the selected options too
            return replace(self, chosen=())
        # an option value: the item page shows it as one of its texts (an unknown click is a no-op)
        shown = {t.strip().lower() for t in observation.split("[SEP]")}
        if target not in _NOT_OPTIONS and target in shown:
            return replace(self, chosen=(*(c for c in self.chosen if c != target), target))
        return self

    def render(self) -> str:
        queries, viewed = " | ".join(self.queries) or "none", ", ".join(self.viewed) or "none"
        return f"Queries: {queries}. Viewed: {viewed}. Chosen: {', '.join(self.chosen) or 'none'}"

    @staticmethod
    def show(observation: str, instruction: str) -> str:
        """The page without its copy of the instruction (the prompt states the task once, last).

        >>> WebShopMemory.show("WebShop [SEP] Instruction: [SEP] buy a mug [SEP] Search", "buy a mug")
        'WebShop [SEP] Search'
        """
        return observation.replace(f"Instruction: [SEP] {instruction} [SEP] ", "")


_ROOM = re.compile(r"Room (\d+) of (\d+)\.")
_WIND = re.compile(r"^Wind blows from the (\w+) door\.$")


@dataclass(frozen=True)
class ChainMemory:
    """The chain testbed's room and the clue heard in it (the clue holds for that room only).

    >>> m = ChainMemory().update("", "Room 1 of 6. Doors: red, blue.")
    >>> m.update("listen", "Wind blows from the blue door.").update("pull lever", "The lever clicks.").render()
    'Room 1 of 6. Heard: blue.'
    >>> m.update("open red door", "The red door leads back to the start. Room 1 of 6. Doors: red, blue.").render()
    'Room 1 of 6. Heard: nothing.'
    """

    room: str = ""
    heard: str = ""

    def update(self, action: str, observation: str) -> ChainMemory:
        if m := _ROOM.search(observation):  # a door was passed (or the episode began): a new room
            return ChainMemory(f"Room {m.group(1)} of {m.group(2)}", "")
        if m := _WIND.match(observation.strip()):
            return replace(self, heard=m.group(1))
        return self

    @staticmethod
    def show(observation: str, instruction: str) -> str:
        return observation

    def render(self) -> str:
        return f"{self.room or 'Room ?'}. Heard: {self.heard or 'nothing'}."


def _digest(observation: str) -> str:
    """A short key of an observation, whitespace-insensitive: what ``GenericMemory`` keeps of it."""
    return hashlib.sha1(" ".join(observation.split()).encode()).hexdigest()[:12]


@dataclass(frozen=True)
class GenericMemory:
    """The memory of an env that registers none: the last actions tried, and whether the current
    observation was seen before in the episode (a loop a tiny model cannot see in two history pairs).

    >>> m = GenericMemory().update("", "A dusty attic.").update("open chest", "The chest is locked.")
    >>> m.update("look", "A dusty attic.").render()
    'Tried: open chest | look. Seen: 2 observations, this one before.'
    """

    tried: tuple[str, ...] = ()  # the last few distinct actions, most recent last
    seen: frozenset[str] = frozenset()  # digests of the episode's observations
    again: bool = False  # the latest observation was seen before

    def update(self, action: str, observation: str) -> GenericMemory:
        key, action = _digest(observation), " ".join(action.split())
        tried = (*(a for a in self.tried if a != action), action)[-5:] if action else self.tried
        return GenericMemory(tried, self.seen | {key}, key in self.seen)

    @staticmethod
    def show(observation: str, instruction: str) -> str:
        return observation

    def render(self) -> str:
        where = "this one before" if self.again else "this one new"
        return f"Tried: {' | '.join(self.tried) or 'nothing'}. Seen: {len(self.seen)} observations, {where}."


MEMORIES = {"alfworld": AlfworldMemory, "webshop": WebShopMemory}
# env-name families with one memory for all their members: every level of the chain testbed
MEMORY_FAMILIES = {"chain-": ChainMemory}


def memory_for(env: str) -> type:
    """The memory class of an env's prompts: the one registered beside the env
    (``register_env(..., memory=...)``), else a built-in env's own, else ``GenericMemory``; never
    another env's memory.

    >>> memory_for("webshop").__name__, memory_for("chain-6x3").__name__, memory_for("no-such-env").__name__
    ('WebShopMemory', 'ChainMemory', 'GenericMemory')
    """
    registered = env_memory(env)
    if registered is not None:
        return registered
    family = next((m for prefix, m in MEMORY_FAMILIES.items() if env.startswith(prefix)), None)
    return MEMORIES.get(env, family or GenericMemory)


@dataclass(frozen=True)
class PromptConfig:
    history: int = 2  # last k (action, observation) pairs
    max_tokens: int = 384
    show_actions: bool = True
    reply_format: str = "plain"  # "plain": action on the first line; "tagged": <action>...</action>

    def __post_init__(self) -> None:
        if self.history < 0:
            raise ValueError(f"PromptConfig.history must be >= 0, got {self.history}")
        if self.reply_format not in ("plain", "tagged"):
            raise ValueError(
                f"PromptConfig.reply_format must be 'plain' or 'tagged', got {self.reply_format!r}"
            )


@dataclass
class EpisodeContext:
    """Everything the prompt of one running episode needs; updated after every step."""

    env: str
    instruction: str
    observation: str
    admissible: tuple[str, ...]
    memory: object = None
    history: list[tuple[str, str]] = field(default_factory=list)  # (action, the observation it produced)

    def __post_init__(self) -> None:
        if self.memory is None:
            self.memory = memory_for(self.env)().update("", self.observation)

    def advance(self, action: str, observation: str, admissible: Sequence[str]) -> None:
        self.history.append((action, observation))
        self.memory = self.memory.update(action, observation)
        self.observation, self.admissible = observation, tuple(admissible)


def _user_message(
    ctx: EpisodeContext,
    cfg: PromptConfig,
    history: int,
    actions: bool,
    now: str | None = None,
    memory: str | None = None,
    instruction: str | None = None,
) -> str:
    """The prompt's text; ``now``, ``memory`` and ``instruction`` replace the current observation as
    shown, the memory's text and the task (cut to fit a budget)."""
    # The task comes last, right before the reply: its words (the object, the destination) are what
    # the candidates must be matched against, and a tiny model attends most easily to nearby tokens.
    parts = [f"Memory: {ctx.memory.render() if memory is None else memory}"]
    recent = ctx.history[-history:] if history else []

    def show(observation: str) -> str:
        return ctx.memory.show(observation.strip(), ctx.instruction)

    if recent:  # the last action's result is the current observation, shown below as "Now"
        # a result that the next action left as it was (a web page after choosing an option) is not repeated
        pairs = pairwise(recent)
        steps = [f"> {a} | {show(o) if o != after else '(unchanged)'}" for (a, o), (_, after) in pairs]
        steps.append(f"> {recent[-1][0]}")
        parts.append("Recent: " + " ".join(steps))
    parts.append(f"Now: {show(ctx.observation) if now is None else now}")
    if actions and ctx.admissible:
        parts.append("Actions: " + " | ".join(ctx.admissible))
    parts.append(f"Task: {ctx.instruction if instruction is None else instruction}")
    parts.append(
        "Reply with <action>your action</action>."
        if cfg.reply_format == "tagged"
        else "Reply with the next action only."
    )
    return "\n".join(parts)


def _chat_ids(tokenizer, content: str) -> list[int]:
    """Token ids of one user message in the chat template, generation prompt appended."""
    messages = [{"role": "user", "content": content}]
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    return list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)


CUT_MARK = "..."  # marks where a text was cut to fit the prompt budget


def cut_end(text: str, n: int) -> str:
    """``text`` cut to its first ``n`` characters, marked.

    >>> cut_end("put a mug in the cabinet", 9)
    'put a mug ...'
    """
    return f"{text[:n].rstrip()} {CUT_MARK}".lstrip()


def cut_middle(text: str, n: int) -> str:
    """``text`` cut to ``n`` characters, its start and end kept and the middle marked: a page's title
    and its last lines (where an env puts the result of the action) both survive.

    >>> cut_middle("You arrive at the pantry. Shelves, jars, sacks. A door leads north.", 40)
    'You arrive at the pa ... A door leads north.'
    """
    head = (n + 1) // 2
    tail = text[len(text) - (n - head) :] if n > head else ""
    return f"{text[:head].rstrip()} {CUT_MARK} {tail.lstrip()}".strip()


def _longest_fit(
    ids_of: Callable[[str], list[int]], text: str, max_tokens: int, cut: Callable[[str, int], str] = cut_end
) -> list[int] | None:
    """``ids_of(cut(text, n))`` for the largest ``n`` whose ids fit in ``max_tokens``, or None where
    none does. Bisection over ``n``: a longer cut tokenizes to as many tokens or more (up to a token
    merged at the cut, which at worst keeps a few characters less than would fit)."""
    # no token spans 32 characters in practice: a longer cut cannot fit, and a 100k-character page
    # is not tokenized whole at every bisection step
    best, low, high = None, 0, min(len(text), 32 * max_tokens)
    while low <= high:
        n = (low + high) // 2
        ids = ids_of(cut(text, n))
        if len(ids) <= max_tokens:
            best, low = ids, n + 1
        else:
            high = n - 1
    return best


def _cut_to_budget(ctx: EpisodeContext, tokenizer, cfg: PromptConfig) -> list[int]:
    """A prompt without history or action list that is still over budget, fitted by cutting the middle
    of the current observation (its start and end stay); where even an empty one is over, the end of
    the memory, then of the task. The chat template's header and the reply format are never cut."""
    texts = {
        "now": ctx.memory.show(ctx.observation.strip(), ctx.instruction),
        "memory": ctx.memory.render(),
        "instruction": ctx.instruction,
    }
    for name in texts:

        def ids_of(text: str, name: str = name) -> list[int]:
            return _chat_ids(tokenizer, _user_message(ctx, cfg, 0, False, **(texts | {name: text})))

        ids = _longest_fit(ids_of, texts[name], cfg.max_tokens, cut_middle if name == "now" else cut_end)
        if ids is not None:
            return ids
        texts[name] = CUT_MARK
    empty = len(ids_of(CUT_MARK))
    raise ValueError(
        f"PromptConfig.max_tokens={cfg.max_tokens} is below the prompt template's own length "
        f"({empty} tokens with every text cut); raise it"
    )


def build_prompt(ctx: EpisodeContext, tokenizer, cfg: PromptConfig) -> list[int]:
    """Token ids of the prompt (chat template, generation prompt appended), within ``cfg.max_tokens``.

    Over budget, the oldest history goes first, then the action list, then the middle of the current
    observation (``_cut_to_budget``): the template, the memory, the task and the reply format are
    always there. A prompt within budget is never cut.
    """
    history, actions = cfg.history, cfg.show_actions
    while True:
        ids = _chat_ids(tokenizer, _user_message(ctx, cfg, history, actions))
        if len(ids) <= cfg.max_tokens:
            return ids
        if history > 0:
            history -= 1
        elif actions:
            actions = False
        else:
            return _cut_to_budget(ctx, tokenizer, cfg)


_THINK = re.compile(r"<think>.*?(</think>|$)", re.S)
_ACTION = re.compile(r"<action>(.*?)(</action>|$)", re.S)


def parse_action(reply: str) -> str:
    """Project a model reply onto an action string (the env judges validity).

    >>> parse_action("<think>the mug is in the sink</think><action> take mug 1 from sinkbasin 1 </action>")
    'take mug 1 from sinkbasin 1'
    >>> parse_action("go to fridge 1\\nbecause apples are cold")
    'go to fridge 1'
    >>> parse_action("<think>unfinished thought")
    ''
    """
    text = _THINK.sub("", reply)
    if m := _ACTION.search(text):
        return " ".join(m.group(1).split())
    for line in text.splitlines():
        line = line.replace("<|im_end|>", "").strip()
        if line:
            return " ".join(line.split())
    return ""
