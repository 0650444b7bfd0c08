"""Incremental decoding of generated token ids into text that, piece by piece, adds up to exactly what the
tokenizer's own ``decode`` of all the ids gives (transformers' ``tokenizer.decode``), on every route.

A token may end inside a character (byte-level BPE splits a UTF-8 sequence over tokens; a sentencepiece
model's byte-fallback tokens ``<0xE2>`` carry one byte each), and a decoder may change the text at a join
(a sentencepiece model's leading space, spaces a cleanup removes before punctuation). So each step decodes
the held tokens with a few committed ones before them as context, and sends only text that can no longer
change: never a trailing U+FFFD (the bytes of a character a later token may finish) nor trailing whitespace.
When generation ends, ``rest`` gives what is still held, as the whole decode renders it (an unfinished
character as U+FFFD, as transformers does), so that the pieces join to the whole decode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

CONTEXT = 4  # committed tokens decoded before the held ones, so that the join decodes as in the whole text
REPLACEMENT = "\ufffd"


def byte_tokens(vocab: dict[str, int]) -> frozenset[int]:
    """The ids of a vocabulary's byte-fallback tokens (``<0x00>`` … ``<0xFF>``, sentencepiece style): a run of
    them is decoded as one byte string, each byte U+FFFD when the run is not UTF-8, so a run's text is final
    only once a token of another kind ends it."""
    return frozenset(i for token, i in vocab.items() if len(token) == 6 and token.startswith("<0x")
                     and token.endswith(">") and all(c in "0123456789ABCDEFabcdef" for c in token[3:5]))


class IncrementalText:
    """``push(token)``: the text that token makes final (often ""); ``rest()``: everything still held.
    ``decode``: the tokenizer's decode of a list of ids (the same the whole answer is decoded with);
    ``held``: ids after which nothing is sent yet (``byte_tokens``)."""

    def __init__(self, decode: Callable[[Sequence[int]], str], context: int = CONTEXT,
                 held: frozenset[int] = frozenset()) -> None:
        self.decode, self.context, self.held = decode, context, held
        self.ids: list[int] = []
        self.done = 0  # ids whose text has been sent in full

    def _window(self) -> tuple[int, str]:
        """The first id of the decoding window, and the text of the window's committed context."""
        start = max(0, self.done - self.context)
        return start, self.decode(self.ids[start:self.done]) if self.done > start else ""

    def push(self, token: int) -> str:
        """Add ``token``; the text now final."""
        self.ids.append(int(token))
        if int(token) in self.held:  # a byte-fallback run may still turn its bytes into U+FFFD
            return ""
        start, before = self._window()
        text = self.decode(self.ids[start:])
        if not text.startswith(before):  # the join changed committed text: decode all of it instead
            return self._from_whole()
        new = text[len(before):]
        final = new.rstrip(REPLACEMENT)
        if final != new:  # an unfinished character at the end: hold everything after the last whole one
            return self._commit("", 0)
        stable = final.rstrip()
        if stable != final or not stable:
            return self._commit("", 0)  # trailing whitespace may still be cleaned up by the next token
        return self._commit(final, len(self.ids))

    def _from_whole(self) -> str:
        """The step decoded from all the ids (what was sent is a prefix of the whole text, or nothing more
        can be sent until it is)."""
        whole = self.decode(self.ids)
        sent = self.decode(self.ids[:self.done]) if self.done else ""
        if not whole.startswith(sent):
            return ""
        new = whole[len(sent):]
        if new.endswith(REPLACEMENT) or new != new.rstrip() or not new:
            return ""
        return self._commit(new, len(self.ids))

    def _commit(self, text: str, done: int) -> str:
        if done:
            self.done = done
        return text

    def rest(self) -> str:
        """Everything not sent yet, as decoding all the ids renders it."""
        if self.done == len(self.ids):
            return ""
        start, before = self._window()
        text = self.decode(self.ids[start:])
        if text.startswith(before):
            tail = text[len(before):]
        else:
            whole, sent = self.decode(self.ids), self.decode(self.ids[:self.done]) if self.done else ""
            tail = whole[len(sent):] if whole.startswith(sent) else ""
        self.done = len(self.ids)
        return tail


def stream_text(decode: Callable[[Sequence[int]], str], ids: Sequence[int],
                held: frozenset[int] = frozenset()) -> list[str]:
    """The pieces ``IncrementalText`` sends for ``ids``, the rest last (what a streamed answer is made of)."""
    stream = IncrementalText(decode, held=held)
    pieces = [stream.push(token) for token in ids]
    return [*pieces, stream.rest()]
