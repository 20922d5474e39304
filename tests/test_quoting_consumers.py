"""compiler/common/quoting.py against the programs that read what it writes: bash reads a quoted word back as
the value, systemd finds the program an Exec line names, docker and systemd read one env file alike, GitHub's
Markdown shows a code span's text and a paragraph's text as written. Refusals are compared whole."""

from __future__ import annotations

import html
import subprocess
from html.parser import HTMLParser

import cmarkgfm
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_compile.common import quoting
from spark_compile.common.errors import UnquotableError

from support.tools import docker_env_file, require_tool, systemd_environment, systemd_verify

# Any text bash can carry in an argument: every code point but NUL and the surrogates (not UTF-8).
BASH_TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\0"), max_size=20)
FEW = settings(max_examples=25, deadline=None, derandomize=True, database=None,
               suppress_health_check=[HealthCheck.too_slow])


def _bash_reads(words: list[str]) -> list[str]:
    """What bash makes of ``words`` joined by spaces as the arguments of printf: one NUL-ended field each."""
    script = "printf '%s\\0' " + " ".join(words) if words else "true"
    bash = require_tool("bash")
    proc = subprocess.run([bash, "--norc", "-c", script], capture_output=True, check=True,
                          env={"LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"})
    return [field.decode() for field in proc.stdout.split(b"\0")[:-1]]


@FEW
@given(st.lists(BASH_TEXT, min_size=1, max_size=8))
def test_bash_reads_every_quoted_word_back_as_its_value(values: list[str]) -> None:
    words = [quoting.bash_word(value) for value in values]
    assert _bash_reads(words) == values
    assert all("\n" not in word for word in words)  # one line: a raw newline could end a here-document


def test_bash_words_joins_and_bash_splits_them_back() -> None:
    values = ["docker", "run", "--env", "A=b c", "", "it's", "$HOME", "*", "~", "a\tb\nc", "it's\n", "é", "x;rm -rf /"]
    assert _bash_reads([quoting.bash_words(values)]) == values


@pytest.mark.parametrize(("value", "word"), [
    ("--tp-size=4", "--tp-size=4"),  # the safe class stays bare
    ("user@host:/a,b%c+d", "user@host:/a,b%c+d"),
    ("", "''"),  # an empty argument must still be an argument
    ("a b", "'a b'"),
    ("it's", "'it'\"'\"'s'"),  # close the quote, a double-quoted ', reopen
    ("~", "'~'"),  # tilde expansion
    ("a*", "'a*'"),  # globbing
    ("é", "'é'"),
    ("a\nb", "$'a\\nb'"),  # a control character: ANSI-C quoting, on one line
    ("x'\ty\\", "$'x\\'\\ty\\\\'"),
    ("\x1b[31m", "$'\\x1b[31m'"),
    ("\x7f", "$'\\x7f'"),
])
def test_bash_word_spells_each_class_as_documented(value: str, word: str) -> None:
    assert quoting.bash_word(value) == word


def test_a_nul_byte_is_refused_for_bash_with_the_value_shown_escaped() -> None:
    with pytest.raises(UnquotableError) as refused:
        quoting.bash_word("a\0b")
    assert str(refused.value) == "'a\\x00b' cannot be written for bash: a NUL byte cannot be part of an argument"


def test_a_refusal_shows_80_characters_and_hides_a_token() -> None:
    with pytest.raises(UnquotableError) as long:
        quoting.systemd_text("x" * 100 + "\n")
    assert str(long.value) == (f"'{'x' * 80}'... cannot be written for a systemd setting: it must be one line "
                               "without control characters")
    token = "hf_" + "A1" * 20
    with pytest.raises(UnquotableError) as secret:
        quoting.systemd_text(f"token {token}\n")
    assert str(secret.value) == ("'token (redacted)\\n' cannot be written for a systemd setting: it must be one "
                                 "line without control characters")


@pytest.mark.parametrize(("value", "quoted"), [
    ("--port", "--port"),
    ("50%", "50%%"),  # a specifier otherwise
    ("$HOME", "$$HOME"),  # systemd expands $NAME in arguments; $$ is a literal dollar
    ("", '""'),
    ("a b", '"a b"'),
    ('say "hi"', '"say \\"hi\\""'),
    ("it's", "\"it's\""),  # inside double quotes a single quote needs nothing
    ("back\\slash", '"back\\\\slash"'),
    ("a\nb\tc\r", '"a\\nb\\tc\\r"'),
    ("\u2028", '"\\u2028"'),
    (";", '";"'),  # a bare ; would separate two commands
    ("a;b", '"a;b"'),
])
def test_systemd_exec_arg_spells_each_class_as_documented(value: str, quoted: str) -> None:
    assert quoting.systemd_exec_arg(value) == quoted


@pytest.mark.parametrize(("argv", "message"), [
    ([], "'' cannot be written for systemd: an Exec line needs a program"),
    (["docker", "run"], "'docker' cannot be written for systemd: the program of an Exec line must be an absolute path"),
    (["/opt/a\"b"], "'/opt/a\"b' cannot be written for systemd: systemd refuses a program path with quotes, "
                    "backslashes or control characters, however quoted"),
    (["/opt/a\\b"], "'/opt/a\\\\b' cannot be written for systemd: systemd refuses a program path with quotes, "
                    "backslashes or control characters, however quoted"),
    (["/bin/echo", "a\0"], "'a\\x00' cannot be written for systemd: a NUL byte cannot be part of an argument"),
])
def test_systemd_command_refusals(argv: list[str], message: str) -> None:
    with pytest.raises(UnquotableError) as refused:
        quoting.systemd_command(argv)
    assert str(refused.value) == message


def test_a_program_path_keeps_its_dollar_and_doubles_its_percent() -> None:
    assert quoting.systemd_command(["/opt/$x/50%/run me", "$y", "%n"]) == '"/opt/$x/50%%/run me" $$y %%n'


# Program paths systemd must find again: spaces, specifiers, a dollar, non-ASCII, a semicolon.
PROGRAMS = ["/opt/spark compile/run", "/opt/50%/run", "/opt/$HOME/run", "/opt/é/run", "/opt/a;b/run",
            "/opt/x=y,z@w+v/run"]


def test_systemd_finds_every_program_the_exec_line_names() -> None:
    """With only the programs' stubs present, systemd-analyze reports any path it read differently as "not
    executable"; a clean verify means it read each quoted path back exactly. It checks the first command of
    each Exec list only, hence one unit per program."""
    units = {f"probe{i}.service": f"[Unit]\nDescription={quoting.systemd_text(f'probe % {i}')}\n[Service]\n"
             f"Type=oneshot\nExecStart={quoting.systemd_command([program, 'a b', '50%', '$X', ';'])}\n"
             for i, program in enumerate(PROGRAMS)}
    assert systemd_verify(units, extra_executables=PROGRAMS, stub_unit_executables=False) == ""


def test_systemd_reports_a_program_it_cannot_find() -> None:
    """The probe above can fail: a path written without quoting is read as a shorter program."""
    unit = "[Unit]\nDescription=x\n[Service]\nType=oneshot\nExecStart=/opt/spark compile/run\n"
    out = systemd_verify({"probe.service": unit}, extra_executables=PROGRAMS, stub_unit_executables=False)
    assert "Command /opt/spark is not executable" in out, out


@pytest.mark.parametrize(("value", "message"), [
    ("etc/env", "'etc/env' cannot be written for a systemd path setting: it must be an absolute path without "
                "control characters or edge spaces"),
    ("/etc/env ", "'/etc/env ' cannot be written for a systemd path setting: it must be an absolute path without "
                  "control characters or edge spaces"),
    ("/etc/\u2029env", "'/etc/\\u2029env' cannot be written for a systemd path setting: it must be an absolute "
                       "path without control characters or edge spaces"),
])
def test_systemd_path_setting_refusals(value: str, message: str) -> None:
    with pytest.raises(UnquotableError) as refused:
        quoting.systemd_path_setting(value)
    assert str(refused.value) == message


def test_a_path_setting_doubles_only_percent() -> None:
    assert quoting.systemd_path_setting("/etc/spark 1/%i $x.env") == "/etc/spark 1/%%i $x.env"


ENV_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=12)


@settings(max_examples=8, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ENV_TEXT, min_size=1, max_size=12))
def test_docker_and_systemd_read_every_accepted_env_value_alike(values: list[str]) -> None:
    accepted = {f"V{i}": value for i, value in enumerate(values) if not _refused_for_env(value)}
    text = quoting.env_file(accepted.items())
    assert systemd_environment(text) == accepted
    assert docker_env_file(text) == accepted


def _refused_for_env(value: str) -> bool:
    try:
        quoting.env_file_value(value)
    except UnquotableError:
        return True
    return False


@pytest.mark.parametrize(("value", "why"), [
    ("a\nB=1", "contains a line break, which ends the line in an env file"),
    (" a", "has leading or trailing spaces: systemd strips them, docker keeps them"),
    ('"a"', "contains a quote or backslash: systemd unquotes and unescapes it, docker keeps it as written"),
    ("a\\b", "contains a quote or backslash: systemd unquotes and unescapes it, docker keeps it as written"),
    ("$A", "contains '$' or a backtick, which systemd may treat as a variable reference"),
    ("é", "contains a character outside printable ASCII"),
    ("x" * 32_769, "is longer than 32768 characters (docker refuses env-file lines over 64 KiB)"),
])
def test_env_file_refuses_what_docker_and_systemd_read_differently(value: str, why: str) -> None:
    with pytest.raises(UnquotableError) as refused:
        quoting.env_file([("NAME", value)])
    assert str(refused.value).endswith(f" cannot be written for an env file: {why}")


def test_the_env_value_refusals_are_real_disagreements() -> None:
    """Each refused class is read two ways by the two consumers (or cut short): the refusal is not caution."""
    for value in (" a", "'a'", "a\\tb"):
        text = f"NAME={value}\n"
        assert systemd_environment(text) != docker_env_file(text), value


class _Text(HTMLParser):
    """The text and the tag names of an HTML fragment."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def _rendered(markdown: str) -> tuple[str, list[str]]:
    parser = _Text()
    parser.feed(cmarkgfm.github_flavored_markdown_to_html(markdown).removesuffix("\n"))
    return "".join(parser.text), parser.tags


MARKDOWN_CHARS = "abc 019#>+=.)-*_[]|~`\\<>&!():/\"'{}"


@settings(deadline=None)  # no wall-clock bound: the first example pays for imports
@given(st.text(st.sampled_from(MARKDOWN_CHARS), min_size=1, max_size=16))
def test_a_code_span_shows_exactly_its_value(value: str) -> None:
    text, tags = _rendered(quoting.markdown_code(value))
    assert (text, tags) == (value, ["p", "code"])


def test_a_code_span_keeps_edge_spaces() -> None:
    """CommonMark strips one space from each end of a span that has both: the span pads them."""
    for value in (" a ", " `` ", "  ", " a"):
        assert _rendered(quoting.markdown_code(value)) == (value, ["p", "code"]), value


WORD = st.text(st.sampled_from(MARKDOWN_CHARS.replace(" ", "")), min_size=1, max_size=6)


@settings(deadline=None)  # no wall-clock bound: the first example pays for imports
@given(st.lists(WORD, min_size=1, max_size=5).map(" ".join))
def test_markdown_text_is_shown_as_written_in_one_paragraph(value: str) -> None:
    text, tags = _rendered(quoting.markdown_text(value))
    assert text == value
    assert set(tags) <= {"p", "a"}  # GitHub links a bare www.x.y; no other element may come of the text


def test_markdown_text_escapes_html_and_refuses_control_characters() -> None:
    assert quoting.markdown_text("<b>&amp;\n# head") == "&lt;b&gt;&amp;amp;\n\\# head"
    with pytest.raises(UnquotableError) as refused:
        quoting.markdown_text("a\x1bb")
    assert str(refused.value) == "'a\\x1bb' cannot be written for Markdown: it holds control characters"


def test_github_workflow_command_escapes_decode_to_the_value() -> None:
    """The toolkit's escapeData/escapeProperty: '%' first, so an escape in the value stays literal."""
    value = "50%0A done:\r\n a,b"
    assert quoting.github_data(value) == "50%250A done:%0D%0A a,b"
    assert quoting.github_property(value) == "50%250A done%3A%0D%0A a%2Cb"
    decoded = quoting.github_property(value)
    for escape, char in (("%3A", ":"), ("%2C", ","), ("%0D", "\r"), ("%0A", "\n"), ("%25", "%")):
        decoded = decoded.replace(escape, char)
    assert decoded == value


def test_terminal_text_shows_bidi_controls_and_keeps_printable_unicode() -> None:
    assert quoting.terminal_text("a\u202eb\u2066c é\x9b\n") == "a\\u202eb\\u2066c é\\x9b\n"
    assert quoting.terminal_text("a\nb\tc", one_line=True) == "a\\nb\\tc"
    assert html.unescape(quoting.markdown_text("a & b")) == "a & b"
