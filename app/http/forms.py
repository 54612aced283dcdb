"""HTML form bodies (``application/x-www-form-urlencoded``, ``multipart/form-data``) and GET query strings decoded
strictly: every name and value must be UTF-8 without a NUL character, each name comes once, and a form holds at most
``MAX_FORM_FIELDS`` fields. ``request_fields``
is the one reader of a LanguageTool request's fields (the Guard reads them for an ``apiKey`` field, the route for
the rest; the Guard leaves what it read in the scope under ``FIELDS_SCOPE_KEY``, so a form is parsed once).

Not starlette's ``Request.form()``: it turns invalid UTF-8 into U+FFFD (or Latin-1) without a word, and its errors
reach FastAPI as a bare 400 that the server could only call "not valid UTF-8 JSON". Here each fault is a
``FormError`` naming the form, answered 400 or 413 like the JSON routes' errors.
"""

from __future__ import annotations

from urllib.parse import parse_qsl

MAX_FORM_FIELDS = 1000  # starlette's own default for multipart; LanguageTool's clients send about ten
FIELDS_SCOPE_KEY = "electra_detect.fields"  # a request's fields, once read (by the Guard, for an apiKey field)


class FormError(ValueError):
    """A form body the server cannot read: ``status`` (400 or 413) and ``kind`` for the JSON error answer."""

    def __init__(self, status: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.status, self.kind, self.message = status, kind, message


def _too_many() -> FormError:
    return FormError(413, "too_many_fields", f"the form has more than {MAX_FORM_FIELDS} fields")


def _utf8(data: bytes, what: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise FormError(400, "bad_request", f"the form's {what} is not valid UTF-8") from None


def request_fields(method: str, query: bytes, body: bytes, content_type: str | None) -> dict[str, str]:
    """A LanguageTool request's fields as its own server reads them: a GET's from the query string, a POST's from
    the form body (``parse_form``). Shape: ``("GET", b"text=Hi&language=en", b"", None)`` -> ``{"text": "Hi",
    "language": "en"}``."""
    if method.upper() in ("GET", "HEAD"):
        return parse_query(query)
    return parse_form(body, content_type)


def parse_query(query: bytes) -> dict[str, str]:
    """The fields of a URL's query string (percent-encoded UTF-8, ``+`` for a space), strictly decoded."""
    try:
        text = query.decode("ascii")  # a URL's query is ASCII on the wire; anything else is percent-encoded
    except UnicodeDecodeError:
        raise FormError(400, "bad_request", "the query string holds bytes that are not percent-encoded") from None
    return _pairs(text, "query string")


def parse_form(body: bytes, content_type: str | None) -> dict[str, str]:
    """Field name -> value of a form body (a name given twice, or a NUL character, is a 400); an empty body is an
    empty form.

    Shape: ``b"text=Hi&language=en"`` with ``application/x-www-form-urlencoded`` -> ``{"text": "Hi", "language":
    "en"}``; empty values are kept (``text=`` is an empty text, not a missing one)."""
    if not body:
        return {}
    media = (content_type or "").split(";")[0].strip().lower()
    if media == "multipart/form-data":
        return _multipart(body, content_type or "")
    return _pairs(_utf8(body, "body"), "form")


def _pairs(text: str, what: str) -> dict[str, str]:
    """Name -> value of ``a=1&b=2``, percent-decoded as UTF-8 (each name once: :func:`_fields`)."""
    try:
        pairs = parse_qsl(text, keep_blank_values=True, encoding="utf-8", errors="strict",
                          max_num_fields=MAX_FORM_FIELDS)
    except UnicodeDecodeError:
        raise FormError(400, "bad_request", f"a percent-encoded {what} field is not valid UTF-8") from None
    except ValueError:  # parse_qsl's "Max number of fields exceeded"
        raise _too_many() from None
    return _fields(pairs, what)


def _fields(pairs: list[tuple[str, str]], what: str) -> dict[str, str]:
    """The fields as a dict: a name given twice is a 400 (which of two texts, or two keys, was meant cannot be
    told: taking one silently checks what the client did not mean), and so is a NUL character, which the JSON
    routes refuse too (JSON's parser takes no raw control character)."""
    fields: dict[str, str] = {}
    for name, value in pairs:
        if name in fields:
            raise FormError(400, "bad_request", f"the {what} gives the field {name[:40]!r} twice: give it once")
        if "\x00" in name or "\x00" in value:
            raise FormError(400, "bad_request", f"the {what} field {name[:40]!r} holds a NUL character (U+0000)")
        fields[name] = value
    return fields


def _multipart(body: bytes, content_type: str) -> dict[str, str]:
    from python_multipart.multipart import MultipartParser, parse_options_header

    _, options = parse_options_header(content_type)
    boundary = options.get(b"boundary")
    if not boundary:
        raise FormError(400, "bad_request", "a multipart/form-data body needs a boundary in its Content-Type")
    parts: list[tuple[bytes, bytearray]] = []
    header: dict[str, bytes] = {"field": b"", "value": b""}
    names: list[bytes | None] = [None]

    def on_part_begin() -> None:
        if len(parts) >= MAX_FORM_FIELDS:
            raise _too_many()
        names[0] = None

    def on_header_field(data: bytes, start: int, end: int) -> None:
        header["field"] += data[start:end]

    def on_header_value(data: bytes, start: int, end: int) -> None:
        header["value"] += data[start:end]

    def on_header_end() -> None:
        if header["field"].strip().lower() == b"content-disposition":
            names[0] = parse_options_header(header["value"])[1].get(b"name")
        header["field"], header["value"] = b"", b""

    def on_headers_finished() -> None:
        if names[0] is None:
            raise FormError(400, "bad_request", "a multipart part has no Content-Disposition name")
        parts.append((names[0], bytearray()))

    def on_part_data(data: bytes, start: int, end: int) -> None:
        parts[-1][1].extend(data[start:end])

    parser = MultipartParser(boundary, {"on_part_begin": on_part_begin, "on_header_field": on_header_field,
                                        "on_header_value": on_header_value, "on_header_end": on_header_end,
                                        "on_headers_finished": on_headers_finished, "on_part_data": on_part_data})
    try:
        parser.write(body)
        parser.finalize()
    except FormError:
        raise
    except Exception as exc:  # python-multipart's MultipartParseError and kin: the body is not a multipart form
        raise FormError(400, "bad_request", f"the body is not a valid multipart form ({type(exc).__name__})") from None
    return _fields([(_utf8(name, "field name"), _utf8(bytes(value), "value")) for name, value in parts], "form")
