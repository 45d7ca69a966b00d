"""Text pieces from a stream of token ids that never split a UTF-8 character.

A byte-level token can end in the middle of a character (an emoji is four bytes, often two
tokens). ExecuTorch 1.5.1's runner hands such a piece to Python as it is and raises
``UnicodeDecodeError``; here a piece whose decoded text ends in U+FFFD (an incomplete
character) is held back until a later token completes it.

The decode is over a short window of recent ids rather than one id at a time, so tokenizers whose
pieces depend on their neighbours (SentencePiece's leading space) come out right too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

_INCOMPLETE = "\ufffd"


class TextStream:
    """Feed ids with :meth:`push`; each call returns the newly completed text ("" if none)."""

    def __init__(self, decode: Callable[[Sequence[int]], str], context: Sequence[int] = ()
                 ) -> None:
        self._decode = decode
        self._ids = [int(i) for i in context]
        self._read = len(self._ids)  # ids before this are already emitted
        self._before = self._decode(self._ids)  # the text of the window's emitted ids

    def push(self, token: int) -> str:
        self._ids.append(int(token))
        text = self._decode(self._ids)
        if len(text) > len(self._before) and not text.endswith(_INCOMPLETE):
            piece = text[len(self._before):]
            # The next window starts at the ids emitted now: enough context for the decoder.
            del self._ids[:self._read]
            self._read = len(self._ids)
            self._before = self._decode(self._ids)
            return piece
        return ""

    def flush(self) -> str:
        """The held-back text at the end of generation (an unfinished character as U+FFFD)."""
        piece = self._decode(self._ids)[len(self._before):]
        self._ids, self._read, self._before = [], 0, ""
        return piece
