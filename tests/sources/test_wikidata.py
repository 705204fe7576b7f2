"""Wikidata source against a real Oxigraph server (tests/sources/wikidata_graph.ttl) and loopback fakes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from fairsets.fetch.retry import HttpStatusError, RetryPolicy, user_agent
from fairsets.sources.wikidata import (
    ASSOCIATIONS,
    GENDERS,
    OUTPUT_SCHEMA,
    WIKIDATA_ENDPOINT,
    SparqlResponseError,
    State,
    assign_states,
    build_query,
    fetch_people,
    fetch_to_parquet,
    fetch_wikidata_cli,
    load_states,
    normalise_image,
    resolve_states,
)
from servers import LoopbackServer, Request, Response, json_response
from sources.oxigraph import oxigraph_server

GRAPH = Path(__file__).with_name("wikidata_graph.ttl")
FP = "http://commons.wikimedia.org/wiki/Special:FilePath/"
MH, AS, DNHDD, LA, JK = "Q1191", "Q1164", "Q77997266", "Q200667", "Q66278313"
NO_RETRY = RetryPolicy(attempts=1)

# (person, label, file, state, association, gender) in the documented order:
# person (numeric), state (numeric), association priority, image URL.
EXPECTED_ROWS = [
    ("Q9000001", "Asha Patil", "File:Asha Patil.jpg", MH, "birth", "female"),
    ("Q9000002", "Bhaskar Bora", "File:Bhaskar Bora 2019.jpg", AS, "residence", "male"),
    ("Q9000002", "Bhaskar Bora", "File:Bhaskar Bora 2019.jpg", MH, "education", "male"),
    ("Q9000003", "Chandra Das", "File:Chandra Das (2015), Dispur.jpg", AS, "work", "female"),
    ("Q9000003", "Chandra Das", "File:Chandra Das.jpg", AS, "work", "female"),
    ("Q9000003", "Chandra Das", "File:Chandra Das (2015), Dispur.jpg", AS, "education", "female"),
    ("Q9000003", "Chandra Das", "File:Chandra Das.jpg", AS, "education", "female"),
    ("Q9000004", "Dev Kulkarni", "File:Dev Kulkarni.jpg", MH, "education", "male"),
    ("Q9000005", "Eknath Jadhav", "File:Eknath Jadhav.jpg", MH, "constituency", "male"),
    ("Q9000006", "Farida Ahmed", "File:Farida Ahmed.jpg", AS, "constituency", "female"),
    ("Q9000007", "Q9000007", "File:Gopal Tandel.jpg", DNHDD, "birth", "male"),
    ("Q9000008", "Hema Varli", "File:Hema Varli.jpg", DNHDD, "birth", "female"),
    ("Q9000008", "Hema Varli", "File:Hema Varli.jpg", DNHDD, "residence", "female"),
    ("Q9000012", "Lata Gogoi", "File:Lata Gogoi.jpg", AS, "work", "female"),
    ("Q9000012", "Lata Gogoi", "File:Lata Gogoi.jpg", MH, "birth", "female"),
    ("Q9000013", "Mohan Baruah", "File:Mohan Baruah.jpg", AS, "birth", "male"),
    ("Q9000013", "Mohan Baruah", "File:Mohan Baruah.jpg", MH, "birth", "male"),
    ("Q9000013", "Mohan Baruah", "File:Mohan Baruah.jpg", MH, "education", "male"),
    ("Q9000014", "Nandini Saikia", "File:Nandini Saikia.jpg", AS, "birth", "female"),
    ("Q9000014", "Nandini Saikia", "File:Nandini Saikia.jpg", DNHDD, "birth", "female"),
    ("Q9000015", "Omkar Joshi", "File:Omkar Joshi at IIT été.jpg", MH, "birth", "male"),
    ("Q9000015", "Omkar Joshi", "File:Omkar Joshi.jpg", MH, "birth", "male"),
    ("Q9000018", "Rekha More", "File:Rekha More.jpg", MH, "birth", "female"),
    ("Q9000019", "Sonam Wangdus", "File:Sonam Wangdus.jpg", LA, "birth", "male"),
    ("Q9000020", "Tara Kalita", "File:Tara Kalita.jpg", AS, "birth", "female;male"),
    ("Q9000021", "Uzma Mir", "File:Uzma Mir.jpg", JK, "birth", "female"),
    ("Q9000022", "Vikram Hazarika", "File:Vikram Hazarika.jpg", AS, "constituency", "male"),
]

# (person, file, state, association, associations) of assign_states.
EXPECTED_ASSIGNED = [
    ("Q9000001", "File:Asha Patil.jpg", MH, "birth", "Q1191:birth"),
    ("Q9000002", "File:Bhaskar Bora 2019.jpg", AS, "residence", "Q1164:residence;Q1191:education"),
    ("Q9000003", "File:Chandra Das (2015), Dispur.jpg", AS, "work", "Q1164:education;Q1164:work"),
    ("Q9000003", "File:Chandra Das.jpg", AS, "work", "Q1164:education;Q1164:work"),
    ("Q9000004", "File:Dev Kulkarni.jpg", MH, "education", "Q1191:education"),
    ("Q9000005", "File:Eknath Jadhav.jpg", MH, "constituency", "Q1191:constituency"),
    ("Q9000006", "File:Farida Ahmed.jpg", AS, "constituency", "Q1164:constituency"),
    ("Q9000007", "File:Gopal Tandel.jpg", DNHDD, "birth", "Q77997266:birth"),
    ("Q9000008", "File:Hema Varli.jpg", DNHDD, "birth", "Q77997266:birth;Q77997266:residence"),
    ("Q9000012", "File:Lata Gogoi.jpg", MH, "birth", "Q1164:work;Q1191:birth"),
    # birth in both; Maharashtra also has education (2 associations against 1)
    ("Q9000013", "File:Mohan Baruah.jpg", MH, "birth", "Q1164:birth;Q1191:birth;Q1191:education"),
    # birth in both, one association each: the lower numeric QID
    ("Q9000014", "File:Nandini Saikia.jpg", AS, "birth", "Q1164:birth;Q77997266:birth"),
    ("Q9000015", "File:Omkar Joshi at IIT été.jpg", MH, "birth", "Q1191:birth"),
    ("Q9000015", "File:Omkar Joshi.jpg", MH, "birth", "Q1191:birth"),
    ("Q9000018", "File:Rekha More.jpg", MH, "birth", "Q1191:birth"),
    ("Q9000019", "File:Sonam Wangdus.jpg", LA, "birth", "Q200667:birth"),
    ("Q9000020", "File:Tara Kalita.jpg", AS, "birth", "Q1164:birth"),
    ("Q9000021", "File:Uzma Mir.jpg", JK, "birth", "Q66278313:birth"),
    ("Q9000022", "File:Vikram Hazarika.jpg", AS, "constituency", "Q1164:constituency"),
]


def _tuples(rows: list[dict]) -> list[tuple]:
    return [(r["person"], r["label"], r["file"], r["state"], r["association"], r["gender"]) for r in rows]


@pytest.fixture(scope="module")
def endpoint() -> Iterator[str]:
    with oxigraph_server(GRAPH) as url:
        yield url


@pytest.fixture(scope="module")
def states() -> list[State]:
    return resolve_states([MH, AS, DNHDD, LA, JK], load_states())


@pytest.fixture(scope="module")
def rows(endpoint: str, states: list[State]) -> list[dict]:
    return fetch_people(states, ["male", "female"], endpoint=endpoint, policy=NO_RETRY)


# --------------------------------------------------------------------------- exact results


def test_fetch_people_exact_rows(rows: list[dict]) -> None:
    assert _tuples(rows) == EXPECTED_ROWS
    names = {MH: "Maharashtra", AS: "Assam", DNHDD: "Dadra and Nagar Haveli and Daman and Diu"}
    for r in rows:
        assert set(r) == {"person", "label", "image", "file", "state", "state_name", "gender", "association"}
        assert r["image"].startswith(FP)
        assert r["state_name"] == names.get(r["state"], r["state_name"])
    images = {r["file"]: r["image"] for r in rows}
    assert images["File:Chandra Das (2015), Dispur.jpg"] == FP + "Chandra%20Das%20%282015%29%2C%20Dispur.jpg"
    # an https IRI with underscores is normalised to Wikidata's form
    assert images["File:Omkar Joshi at IIT été.jpg"] == FP + "Omkar%20Joshi%20at%20IIT%20%C3%A9t%C3%A9.jpg"


def test_exclusions(rows: list[dict]) -> None:
    people = {r["person"] for r in rows}
    # 9: no image, 10: fictional character, 23: horse, 11: non-binary, 16: deprecated statement only,
    # 17: born outside India
    assert not people & {"Q9000009", "Q9000010", "Q9000023", "Q9000011", "Q9000016", "Q9000017"}
    # Leh district still names the former state Q1180, which is not an alias of the J&K union territory
    assert [(r["state"]) for r in rows if r["person"] == "Q9000019"] == [LA]


def test_assign_states_exact(rows: list[dict]) -> None:
    assigned = assign_states(rows)
    got = [(r["person"], r["file"], r["state"], r["association"], r["associations"]) for r in assigned]
    assert got == EXPECTED_ASSIGNED
    assert len({r["person"] for r in assigned}) == len({r["person"] for r in rows})
    assert all(r["label"] and r["gender"] for r in assigned)


def test_assign_states_rules_without_server() -> None:
    def row(person: str, state: str, assoc: str, image: str = "a.jpg") -> dict:
        return {"person": person, "image": image, "state": state, "association": assoc}

    rows = [
        row("Q1", "Q20", "constituency"),
        row("Q1", "Q10", "work"),
        row("Q1", "Q30", "residence"),  # residence beats work and constituency
        row("Q2", "Q20", "birth"),
        row("Q2", "Q10", "birth"),  # tie, same count: lower QID
        row("Q3", "Q20", "birth"),
        row("Q3", "Q10", "birth"),
        row("Q3", "Q20", "work"),  # tie: Q20 has more associations
    ]
    got = {(r["person"], r["state"], r["association"]) for r in assign_states(rows)}
    assert got == {("Q1", "Q30", "residence"), ("Q2", "Q10", "birth"), ("Q3", "Q20", "birth")}


def test_pagination_gives_the_same_rows(endpoint: str, states: list[State], rows: list[dict]) -> None:
    stats: dict[str, int] = {}
    calls: list[tuple[int, int]] = []
    small = fetch_people(
        states,
        ["female", "male"],
        endpoint=endpoint,
        page_size=1,
        policy=NO_RETRY,
        stats=stats,
        progress=lambda done, total: calls.append((done, total)),
    )
    assert small == rows
    units = len(states) * 2 * len(ASSOCIATIONS)
    assert calls == [(i, units) for i in range(1, units + 1)]
    # every (person, image) of a unit is a page of one, plus one short page per unit
    per_unit = {
        (r["state"], g, r["association"], r["person"], r["image"])
        for r in rows
        for g in r["gender"].split(";")
    }
    assert stats["pages"] == units + len(per_unit)
    assert fetch_people(states, ["male", "female"], endpoint=endpoint, page_size=2, policy=NO_RETRY) == rows


def test_subsets_of_associations_and_genders(endpoint: str, states: list[State], rows: list[dict]) -> None:
    only = fetch_people(states, ["female"], endpoint=endpoint, associations=["constituency"], policy=NO_RETRY)
    assert [(r["person"], r["state"]) for r in only] == [("Q9000006", AS)]
    # a two-gender person appears under either gender alone, with that gender
    male = fetch_people(states[1:2], ["male"], endpoint=endpoint, associations=["birth"], policy=NO_RETRY)
    assert [(r["person"], r["gender"]) for r in male] == [("Q9000013", "male"), ("Q9000020", "male")]


def test_alias_only_state_file(endpoint: str, tmp_path: Path) -> None:
    """A user table (qid,name only) and a unit whose alias is the former J&K state: it then takes Leh."""
    csv = tmp_path / "s.csv"
    csv.write_text("qid,name,aliases\nQ66278313,J&K incl. former state,Q1180\n")
    table = load_states(csv)
    assert table == [State("Q66278313", "J&K incl. former state", "state", ("Q1180",), "")]
    got = fetch_people(table, ["male", "female"], endpoint=endpoint, policy=NO_RETRY)
    assert [(r["person"], r["state"]) for r in got] == [("Q9000019", JK), ("Q9000021", JK)]


# --------------------------------------------------------------------------- cache


def test_cache_rerun_needs_no_server(tmp_path: Path, states: list[State], rows: list[dict]) -> None:
    cache = tmp_path / "cache"
    first: dict[str, int] = {}
    with oxigraph_server(GRAPH) as url:
        got = fetch_people(
            states, ["male", "female"], endpoint=url, cache_dir=cache, policy=NO_RETRY, stats=first
        )
    assert got == rows
    assert first["requests"] == first["pages"] and first["cache_hits"] == 0
    assert any(cache.rglob("*.bin"))
    second: dict[str, int] = {}
    # the server is gone: any request would fail (connection refused, no retry)
    again = fetch_people(
        states, ["male", "female"], endpoint=url, cache_dir=cache, policy=NO_RETRY, stats=second
    )
    assert again == rows
    assert second == {"pages": first["pages"], "requests": 0, "cache_hits": first["pages"]}
    with pytest.raises(ConnectionError):  # proves the server really was down
        fetch_people(states[:1], ["male"], endpoint=url, policy=NO_RETRY)


def _sparql_json(person: str = "Q42", image: str = "Douglas%20adams%20portrait.jpg") -> dict:
    return {
        "head": {"vars": ["person", "image", "state", "labelEn", "labelMul", "labelAny"]},
        "results": {
            "bindings": [
                {
                    "person": {"type": "uri", "value": f"http://www.wikidata.org/entity/{person}"},
                    "image": {"type": "uri", "value": FP + image},
                    "state": {"type": "uri", "value": "http://www.wikidata.org/entity/Q1191"},
                    "labelAny": {"type": "literal", "value": "Douglas Adams"},
                }
            ]
        },
    }


def test_cache_counts_requests_on_loopback(tmp_path: Path) -> None:
    with LoopbackServer() as srv:
        srv.route("/sparql", lambda req: json_response(_sparql_json()))
        st = [State("Q1191", "Maharashtra")]
        a = fetch_people(
            st, ["male"], endpoint=srv.url("/sparql"), cache_dir=tmp_path, associations=["birth"]
        )
        b = fetch_people(
            st, ["male"], endpoint=srv.url("/sparql"), cache_dir=tmp_path, associations=["birth"]
        )
        c = fetch_people(st, ["male"], endpoint=srv.url("/sparql"), cache_dir=tmp_path, associations=["work"])
        assert srv.hits("/sparql") == 2  # b came from the cache, c is another query
    assert a == b
    assert a[0]["label"] == "Douglas Adams" and a[0]["file"] == "File:Douglas adams portrait.jpg"
    assert c[0]["association"] == "work"


# --------------------------------------------------------------------------- HTTP behaviour


def _flaky(status: int, retry_after: str | None, then: dict) -> tuple[list[Request], object]:
    seen: list[Request] = []

    def handler(req: Request) -> Response:
        seen.append(req)
        if len(seen) == 1:
            headers = {"Content-Type": "text/plain"}
            if retry_after is not None:
                headers["Retry-After"] = retry_after
            return Response(status, headers, b"slow down")
        return json_response(then)

    return seen, handler


@pytest.mark.parametrize("status", [429, 500, 503])
def test_retry_honours_retry_after(status: int) -> None:
    """429/503 come from urllib, 500 from SPARQLWrapper's EndPointInternalError: Retry-After survives."""
    seen, handler = _flaky(status, "7", _sparql_json())
    sleeps: list[float] = []
    with LoopbackServer() as srv:
        srv.route("/sparql", handler)
        got = fetch_people(
            [State("Q1191", "Maharashtra")],
            ["female"],
            endpoint=srv.url("/sparql"),
            associations=["birth"],
            policy=RetryPolicy(attempts=3, backoff=0.01),
            contact="tests@example.org",
            sleep=sleeps.append,
        )
    assert sleeps == [7.0]
    assert [r["person"] for r in got] == ["Q42"]
    assert len(seen) == 2
    for req in seen:
        assert req.method == "POST"
        assert req.headers["User-Agent"] == user_agent("tests@example.org")
        assert "tests@example.org" in req.headers["User-Agent"]
        assert "application/sparql-results+json" in req.headers["Accept"]
        assert req.query["query"][0] == build_query(
            ["Q1191"], GENDERS["female"], "birth", limit=5000, offset=0
        )


def test_retry_without_retry_after_uses_backoff_then_gives_up() -> None:
    sleeps: list[float] = []
    with LoopbackServer() as srv:
        srv.route("/sparql", lambda req: Response(502, {}, b"bad gateway"))
        with pytest.raises(HttpStatusError) as info:
            fetch_people(
                [State("Q1191", "Maharashtra")],
                ["male"],
                endpoint=srv.url("/sparql"),
                associations=["birth"],
                policy=RetryPolicy(attempts=3, backoff=0.5, jitter=0),
                sleep=sleeps.append,
            )
        assert srv.hits("/sparql") == 3
    assert info.value.status == 502
    assert sleeps == [0.5, 1.0]


def test_bad_query_is_not_retried() -> None:
    with LoopbackServer() as srv:
        srv.route("/sparql", lambda req: Response(400, {"Retry-After": "1"}, b"Parse error: line 3"))
        with pytest.raises(HttpStatusError) as info:
            fetch_people(
                [State("Q1191", "Maharashtra")],
                ["male"],
                endpoint=srv.url("/sparql"),
                associations=["birth"],
                sleep=lambda s: pytest.fail("no retry expected"),
            )
        assert srv.hits("/sparql") == 1
    assert info.value.status == 400 and "Parse error" in str(info.value)


def test_truncated_answer_is_an_error_and_not_cached(tmp_path: Path) -> None:
    body = json.dumps(_sparql_json()).encode()[:-40] + b"\njava.util.concurrent.TimeoutException"
    with LoopbackServer() as srv:
        srv.route("/sparql", lambda req: Response(200, {"Content-Type": "application/json"}, body))
        for _ in range(2):
            with pytest.raises(SparqlResponseError, match="smaller page size"):
                fetch_people(
                    [State("Q1191", "Maharashtra")],
                    ["male"],
                    endpoint=srv.url("/sparql"),
                    cache_dir=tmp_path,
                    associations=["birth"],
                )
        assert srv.hits("/sparql") == 2
    assert not any(tmp_path.rglob("*.bin"))


# --------------------------------------------------------------------------- input checks


def test_bad_input() -> None:
    ok = [State("Q1191", "Maharashtra")]
    with pytest.raises(ValueError, match="not a Wikidata item id"):
        fetch_people([State("1191", "x")], ["male"], endpoint="http://127.0.0.1:9/")
    with pytest.raises(ValueError, match="not a Wikidata item id"):
        fetch_people([State("Q1191", "x", aliases=("Q0",))], ["male"], endpoint="http://127.0.0.1:9/")
    with pytest.raises(ValueError, match="unknown gender"):
        fetch_people(ok, ["other"], endpoint="http://127.0.0.1:9/")
    with pytest.raises(ValueError, match="unknown association"):
        fetch_people(ok, ["male"], associations=["death"], endpoint="http://127.0.0.1:9/")
    with pytest.raises(ValueError, match="page_size"):
        fetch_people(ok, ["male"], page_size=0, endpoint="http://127.0.0.1:9/")
    with pytest.raises(ValueError, match="not a Wikidata item id"):
        build_query(["Q1191 } ; DROP"], GENDERS["male"], "birth", limit=1, offset=0)
    with pytest.raises(ValueError, match="not a Wikidata item id"):
        build_query(["Q1191"], "male", "birth", limit=1, offset=0)
    with pytest.raises(ValueError, match="unknown association"):
        build_query(["Q1191"], GENDERS["male"], "P19", limit=1, offset=0)
    with pytest.raises(ValueError, match="bad page"):
        build_query(["Q1191"], GENDERS["male"], "birth", limit=0, offset=0)


def test_build_query_shape() -> None:
    q = build_query(["Q77997266", "Q46107", "Q66710"], "Q6581072", "constituency", limit=10, offset=20)
    pairs = "(wd:Q77997266 wd:Q77997266) (wd:Q46107 wd:Q77997266) (wd:Q66710 wd:Q77997266)"
    assert f"VALUES (?area ?state) {{ {pairs} }}" in q
    assert "wdt:P21 wd:Q6581072" in q and "wdt:P31 wd:Q5" in q and "wdt:P18" in q
    assert "?pos wdt:P768 ?const" in q and "?st pq:P768 ?const" in q and "wdt:P131* ?area" in q
    assert "ORDER BY ?state ?person ?image" in q and q.rstrip().endswith("LIMIT 10 OFFSET 20")
    assert "SERVICE" not in q and "rdfs:label" in q
    for assoc, prop in [("birth", "P19"), ("residence", "P551"), ("work", "P937"), ("education", "P69")]:
        assert f"?person wdt:{prop} " in build_query(["Q1191"], "Q6581097", assoc, limit=1, offset=0)


@pytest.mark.parametrize(
    ("value", "url", "file"),
    [
        (FP + "A%20b.jpg", FP + "A%20b.jpg", "File:A b.jpg"),
        ("https://commons.wikimedia.org/wiki/Special:FilePath/A_b.jpg", FP + "A%20b.jpg", "File:A b.jpg"),
        (
            "https://commons.wikimedia.org/wiki/File:A_(b),_c.jpg",
            FP + "A%20%28b%29%2C%20c.jpg",
            "File:A (b), c.jpg",
        ),
        ("File:Été 2.png", FP + "%C3%89t%C3%A9%202.png", "File:Été 2.png"),
    ],
)
def test_normalise_image(value: str, url: str, file: str) -> None:
    assert normalise_image(value) == (url, file)


# --------------------------------------------------------------------------- states table


def test_shipped_states_table() -> None:
    table = load_states()
    assert len(table) == 36
    assert sum(s.kind == "state" for s in table) == 28 and sum(s.kind == "ut" for s in table) == 8
    qids = [q for s in table for q in s.area_qids]
    assert len(qids) == len(set(qids))
    by_name = {s.name: s for s in table}
    assert by_name["Uttar Pradesh"].qid == "Q1498" and by_name["Assam"].qid == "Q1164"
    assert by_name["Dadra and Nagar Haveli and Daman and Diu"].qid == DNHDD
    assert set(by_name["Dadra and Nagar Haveli and Daman and Diu"].aliases) == {"Q46107", "Q66710"}
    assert by_name["Ladakh"].qid == LA and by_name["Ladakh"].kind == "ut"
    assert by_name["Jammu and Kashmir"].qid == JK and "Q1180" not in qids
    assert by_name["Delhi"].kind == "ut" and "Q1353" in by_name["Delhi"].area_qids
    assert all(s.note for s in table if s.aliases)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("qid,name\nQ1,A\nX2,B\n", "row 3: qid 'X2'"),
        ("qid,name\nQ1,A\nQ1,B\n", "row 3: Q1 already appears at row 2"),
        ("qid,name,aliases\nQ1,A,Q5\nQ2,B,Q5\n", "row 3: Q5 already appears at row 2"),
        ("qid,name,aliases\nQ1,A,Q5 y\n", "row 2: alias 'y'"),
        ("qid,name\nQ1,A\nQ2,a\n", "row 3: name 'a' already used at row 2"),
        ("qid,name\nQ1,\n", "row 2: empty name"),
        ("id,name\nQ1,A\n", "missing column"),
        ("qid,name\n", "no states"),
        ("qid,name\nQ1,A,surplus\n", "row 2: 3 fields where the header has 2"),
        ('qid,name,note\nQ1,A,"two\nlines"\nQ2,B,x,y\n', "row 4: 4 fields where the header has 3"),
        ("qid,name,name\nQ1,A,B\n", "column(s) name appear more than once"),
        ("qid,name\nQ1,Jos\xe9\n".encode("latin-1").decode("utf-8", "surrogateescape"), "not UTF-8 text"),
    ],
)
def test_load_states_errors(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    with pytest.raises(ValueError, match=r"bad\.csv") as info:
        load_states(path)
    assert message in str(info.value)


def test_resolve_states() -> None:
    table = load_states()
    got = resolve_states(["maharashtra", "Q66710", "Q1191", "Q42", " Delhi "], table)
    assert [s.qid for s in got] == [MH, DNHDD, "Q42", "Q9357528"]
    assert got[2] == State("Q42", "Q42", kind="", aliases=())
    assert resolve_states(None, table) == table
    with pytest.raises(ValueError, match="unknown state 'Atlantis'"):
        resolve_states(["Atlantis"], table)


# --------------------------------------------------------------------------- output


def test_fetch_to_parquet(tmp_path: Path, rows: list[dict]) -> None:
    assigned = assign_states(rows)
    info = fetch_to_parquet(tmp_path / "people.parquet", rows, assigned)
    table = pq.read_table(info["path"])
    assert table.schema.names == OUTPUT_SCHEMA.names
    assert str(table.schema.field("primary").type) == "bool"
    data = table.to_pylist()
    assert len(data) == len(rows) == info["rows"]
    primary = [(r["person"], r["file"], r["state"], r["association"]) for r in data if r["primary"]]
    assert primary == [(p, f, s, a) for p, f, s, a, _ in EXPECTED_ASSIGNED]
    lata = [r for r in data if r["person"] == "Q9000012"]
    assert [(r["state"], r["primary"], r["associations"]) for r in lata] == [
        (AS, False, "Q1164:work;Q1191:birth"),
        (MH, True, "Q1164:work;Q1191:birth"),
    ]
    # empty input still has the schema
    empty = pq.read_table(fetch_to_parquet(tmp_path / "empty.parquet", [], [])["path"])
    assert empty.schema == table.schema and empty.num_rows == 0


def test_fetch_wikidata_cli(endpoint: str, tmp_path: Path) -> None:
    out = tmp_path / "out" / "people.parquet"
    summary = fetch_wikidata_cli(out, endpoint, states=["Assam", "Q66710"], genders=["female"])
    data = pq.read_table(out).to_pylist()
    assert summary["out"] == str(out) and summary["rows"] == len(data)
    assert summary["states"] == [AS, DNHDD] and summary["genders"] == ["female"]
    assert (out.parent / ".wikidata-cache").is_dir() and summary["cache_hits"] == 0
    primary = sorted({(r["person"], r["state"]) for r in data if r["primary"]})
    # Q9000012 works in Assam but was born in Maharashtra, which was not queried: Assam is all we know
    assert primary == [
        ("Q9000003", AS),
        ("Q9000006", AS),
        ("Q9000008", DNHDD),
        ("Q9000012", AS),
        ("Q9000014", AS),
        ("Q9000020", AS),
    ]
    assert summary["people"] == 6 and summary["primary_rows"] == 7
    assert summary["per_state"] == {
        AS: {"name": "Assam", "people": {"female": 5}},
        DNHDD: {"name": "Dadra and Nagar Haveli and Daman and Diu", "people": {"female": 1}},
    }
    again = fetch_wikidata_cli(
        out, endpoint, states=["Q1164", "Dadra and Nagar Haveli and Daman and Diu"], genders=["female"]
    )
    assert again["requests"] == 0 and again["cache_hits"] == summary["pages"] == summary["requests"]
    assert pq.read_table(out).to_pylist() == data


def test_default_endpoint_is_the_public_service() -> None:
    assert WIKIDATA_ENDPOINT == "https://query.wikidata.org/sparql"
    assert GENDERS == {"male": "Q6581097", "female": "Q6581072"}
    assert ASSOCIATIONS == ("birth", "residence", "work", "education", "constituency")


def test_fetch_wikidata_command(endpoint: str, tmp_path: Path) -> None:
    """``fairsets fetch wikidata`` end to end: the Parquet it writes and the summary it prints."""
    from typer.testing import CliRunner

    from fairsets.cli import app

    out = tmp_path / "people.parquet"
    args = ["fetch", "wikidata", "--out", str(out), "--endpoint", endpoint, "--state", "Assam"]
    res = CliRunner().invoke(app, [*args, "--gender", "female"])
    assert res.exit_code == 0, res.output
    data = pq.read_table(out).to_pylist()
    assert {"person", "label", "image", "state", "gender", "association"} <= set(data[0])
    assert {r["state"] for r in data} == {AS} and {r["gender"] for r in data} == {"female"}
    assert "Assam" in res.output
    bad = CliRunner().invoke(app, [*args, "--gender", "other"])
    assert bad.exit_code == 2 and "male or female" in bad.output
