"""The hot path's statements as psycopg receives them (app/studies/hotpath.py `_compact`)."""

from psycopg import _queries

from app.studies import hotpath


def _statements():
    return {name: getattr(hotpath, name) for name in dir(hotpath) if name.endswith("_SQL")}


def test_every_hot_statement_fits_psycopgs_cache_of_parsed_queries():
    # Past this length psycopg parses the query again at every call (a regex pass over the
    # text); the long statements are only under it without their comments.
    for name, sql in _statements().items():
        assert len(hotpath._compact(sql).encode()) <= _queries.MAX_CACHED_STATEMENT_LENGTH, name


def test_compacting_drops_comments_and_blanks_but_never_a_quoted_text():
    sql = "SELECT 'a  -- not a comment', x -- the engine's rule\n   FROM t\n-- gone\nWHERE y = 'it''s'"
    assert hotpath._compact(sql) == "SELECT 'a  -- not a comment', x FROM t WHERE y = 'it''s'"


def test_compacting_keeps_every_placeholder_and_statement():
    for name, sql in _statements().items():
        out = hotpath._compact(sql)
        for token in ("%(", ";"):
            code = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
            assert out.count(token) == code.count(token), (name, token)
