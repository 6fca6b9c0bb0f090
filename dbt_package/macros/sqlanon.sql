{#- sqlanon's generic data tests (README, *dbt*). Each returns the rows that fail: zero rows pass.
    The tests check their arguments here and dispatch to the adapter's macro in sqlanon_sql.sql,
    whose SQL is generated from sqlanon's own templates (duckdb, spark, sqlserver, and a default,
    PostgreSQL's, for any other adapter or where an adapter's would be the same). Every call goes through adapter.dispatch(..., 'sqlanon'), so
    the same files work as the package `sqlanon` (packages.yml) and copied into a project's own
    macros by `sqlanon dbt`. -#}

{% test sqlanon_k_anonymity(model, quasi_identifiers, k) %}
{{ adapter.dispatch('sqlanon_check_columns', 'sqlanon')('sqlanon_k_anonymity', quasi_identifiers, none) }}
{{ adapter.dispatch('sqlanon_check_number', 'sqlanon')('sqlanon_k_anonymity', 'k', k, 1, integer=true) }}
{{ return(adapter.dispatch('test_sqlanon_k_anonymity', 'sqlanon')(model, quasi_identifiers, k)) }}
{% endtest %}

{% test sqlanon_l_diversity(model, quasi_identifiers, sensitive, l, kind='distinct', c=none, estimator='shannon') %}
{{ adapter.dispatch('sqlanon_check_columns', 'sqlanon')('sqlanon_l_diversity', quasi_identifiers, sensitive) }}
{{ adapter.dispatch('sqlanon_check_choice', 'sqlanon')('sqlanon_l_diversity', 'kind', kind, ['distinct', 'entropy', 'recursive']) }}
{{ adapter.dispatch('sqlanon_check_number', 'sqlanon')('sqlanon_l_diversity', 'l', l, 1, integer=(kind != 'entropy')) }}
{% if kind == 'recursive' %}
{{ adapter.dispatch('sqlanon_check_number', 'sqlanon')('sqlanon_l_diversity', 'c', c, 0, exclusive=true) }}
{% endif %}
{{ adapter.dispatch('sqlanon_check_choice', 'sqlanon')('sqlanon_l_diversity', 'estimator', estimator, ['shannon', 'grassberger']) }}
{% if estimator != 'shannon' and kind != 'entropy' %}
{{ exceptions.raise_compiler_error('sqlanon_l_diversity: estimator: ' ~ estimator ~ ' needs kind entropy, got ' ~ kind) }}
{% endif %}
{{ return(adapter.dispatch('test_sqlanon_l_diversity', 'sqlanon')(model, quasi_identifiers, sensitive, l, kind, c, estimator)) }}
{% endtest %}

{% test sqlanon_t_closeness(model, quasi_identifiers, sensitive, t, measure='emd-equal', order=none, reference=none, hierarchy=none) %}
{{ adapter.dispatch('sqlanon_check_columns', 'sqlanon')('sqlanon_t_closeness', quasi_identifiers, sensitive) }}
{{ adapter.dispatch('sqlanon_check_choice', 'sqlanon')('sqlanon_t_closeness', 'measure', measure, ['emd-equal', 'emd-ordered', 'emd-hierarchical', 'kl']) }}
{% if measure == 'emd-hierarchical' and hierarchy is not mapping %}
{{ exceptions.raise_compiler_error('sqlanon_t_closeness: hierarchy: emd-hierarchical needs a mapping value -> [level1, ...], got ' ~ hierarchy) }}
{% endif %}
{{ adapter.dispatch('sqlanon_check_number', 'sqlanon')('sqlanon_t_closeness', 't', t, 0) }}
{% if order is not none and (order is string or order is not iterable) %}
{{ exceptions.raise_compiler_error('sqlanon_t_closeness: order: expected a list of values, got ' ~ order) }}
{% endif %}
{{ return(adapter.dispatch('test_sqlanon_t_closeness', 'sqlanon')(model, quasi_identifiers, sensitive, t, measure, order, reference, hierarchy)) }}
{% endtest %}

{% test sqlanon_max_risk(model, quasi_identifiers, max, kind='prosecutor') %}
{{ adapter.dispatch('sqlanon_check_columns', 'sqlanon')('sqlanon_max_risk', quasi_identifiers, none) }}
{{ adapter.dispatch('sqlanon_check_choice', 'sqlanon')('sqlanon_max_risk', 'kind', kind, ['prosecutor', 'average']) }}
{{ adapter.dispatch('sqlanon_check_number', 'sqlanon')('sqlanon_max_risk', 'max', max, 0, exclusive=true) }}
{{ return(adapter.dispatch('test_sqlanon_max_risk', 'sqlanon')(model, quasi_identifiers, max, kind)) }}
{% endtest %}

{#- Delta-disclosure privacy (Brickell and Shmatikov 2008; ARX's DDisclosurePrivacy): every value
    present in a class has |log2(q/p)| < delta, p its share in the reference (default the model). -#}
{% test sqlanon_delta_disclosure(model, quasi_identifiers, sensitive, delta, reference=none) %}
{{ adapter.dispatch('sqlanon_check_columns', 'sqlanon')('sqlanon_delta_disclosure', quasi_identifiers, sensitive) }}
{{ adapter.dispatch('sqlanon_check_number', 'sqlanon')('sqlanon_delta_disclosure', 'delta', delta, 0, exclusive=true) }}
{{ return(adapter.dispatch('test_sqlanon_delta_disclosure', 'sqlanon')(model, quasi_identifiers, sensitive, delta, reference)) }}
{% endtest %}

{#- Beta-likeness (Cao and Karras 2012; ARX's BasicBLikeness, EnhancedBLikeness): every value present
    in a class has (q - p)/p <= beta (basic), or <= min(beta, -ln p) (enhanced). -#}
{% test sqlanon_beta_likeness(model, quasi_identifiers, sensitive, beta, kind='basic', reference=none) %}
{{ adapter.dispatch('sqlanon_check_columns', 'sqlanon')('sqlanon_beta_likeness', quasi_identifiers, sensitive) }}
{{ adapter.dispatch('sqlanon_check_choice', 'sqlanon')('sqlanon_beta_likeness', 'kind', kind, ['basic', 'enhanced']) }}
{{ adapter.dispatch('sqlanon_check_number', 'sqlanon')('sqlanon_beta_likeness', 'beta', beta, 0, exclusive=true) }}
{{ return(adapter.dispatch('test_sqlanon_beta_likeness', 'sqlanon')(model, quasi_identifiers, sensitive, beta, kind, reference)) }}
{% endtest %}

{#- Column names: a non-empty list of quasi-identifiers, a sensitive attribute apart from them, and
    none named like the figures the tests return or sqlanon's internal aliases. -#}
{% macro default__sqlanon_check_columns(test, quasi_identifiers, sensitive) %}
{%- set reserved = ['class_size', 'distinct_values', 'entropy', 'entropy_g', 'r1', 'tail', 'distance', 'risk',
                     'dd', 'bl', 'ble'] -%}
{%- if quasi_identifiers is string or quasi_identifiers is not iterable or quasi_identifiers | length == 0 -%}
{{ exceptions.raise_compiler_error(test ~ ': quasi_identifiers: expected a non-empty list of column names, got ' ~ quasi_identifiers) }}
{%- endif -%}
{%- for name in quasi_identifiers | list + ([sensitive] if sensitive is not none else []) -%}
{%- if name is not string -%}
{{ exceptions.raise_compiler_error(test ~ ': expected column names, got ' ~ name) }}
{%- elif name | lower in reserved or (name | lower).startswith('sqlanon_') -%}
{{ exceptions.raise_compiler_error(test ~ ': column ' ~ name ~ ' has the name of a figure the test returns; rename it in a model') }}
{%- endif -%}
{%- endfor -%}
{%- if sensitive is not none and sensitive in quasi_identifiers -%}
{{ exceptions.raise_compiler_error(test ~ ': sensitive: ' ~ sensitive ~ ' is also a quasi-identifier') }}
{%- endif -%}
{% endmacro %}

{% macro default__sqlanon_check_number(test, name, value, least, integer=false, exclusive=false) %}
{%- if value is not number or value is sameas true or value is sameas false
      or (integer and value != (value | int)) or value < least or (exclusive and value == least) -%}
{{ exceptions.raise_compiler_error(test ~ ': ' ~ name ~ ': expected ' ~ ('a whole number' if integer else 'a number')
   ~ (' above ' if exclusive else ' of at least ') ~ least ~ ', got ' ~ value) }}
{%- endif -%}
{% endmacro %}

{% macro default__sqlanon_check_choice(test, name, value, choices) %}
{%- if value not in choices -%}
{{ exceptions.raise_compiler_error(test ~ ': ' ~ name ~ ': expected one of ' ~ choices | join(', ') ~ ', got ' ~ value) }}
{%- endif -%}
{% endmacro %}

{#- The value order of the sensitive attribute for emd-ordered: its rank in ``order``, else the
    value itself (as sqlanon's policy key columns.<name>.order). -#}
{% macro default__sqlanon_order_key(column, order) %}
{%- if order is none or order | length == 0 -%}
{{ column }}
{%- else -%}
CASE {{ column }}{% for v in order %} WHEN {{ adapter.dispatch('sqlanon_literal', 'sqlanon')(v) }} THEN {{ loop.index0 }}{% endfor %} END
{%- endif -%}
{% endmacro %}

{#- A column name as an identifier. dbt's adapter.quote wraps the name in quotes without doubling a
    quote inside it, so a column named 'a" OR ...' would end the identifier and write SQL: here the
    quote character is doubled where the engine's rule is known (DuckDB, PostgreSQL: "";
    Spark: ``; SQL Server: ]] inside [ ]), and any other adapter refuses a name holding a quote. -#}
{% macro default__sqlanon_quote(name) %}
{%- if '"' in name or '`' in name or ']' in name -%}
{{ exceptions.raise_compiler_error('sqlanon: column ' ~ name ~ ' holds a quote character; rename it in a model') }}
{%- endif -%}
{{ adapter.quote(name) }}
{%- endmacro %}

{% macro duckdb__sqlanon_quote(name) %}"{{ name | replace('"', '""') }}"{% endmacro %}

{% macro postgres__sqlanon_quote(name) %}"{{ name | replace('"', '""') }}"{% endmacro %}

{% macro spark__sqlanon_quote(name) %}`{{ name | replace('`', '``') }}`{% endmacro %}

{% macro sqlserver__sqlanon_quote(name) %}[{{ name | replace(']', ']]') }}]{% endmacro %}

{% macro default__sqlanon_literal(value) %}
{%- if value is number and value is not sameas true and value is not sameas false -%}
{{ value }}
{%- else -%}
'{{ value | string | replace("'", "''") }}'
{%- endif -%}
{% endmacro %}

{#- emd-hierarchical's hierarchy as rows (s, lvl, g): each value's label at levels 1..H-1, as text
    (a trailing '*', the root, is left out); no rows for a hierarchy of the values and '*' alone.
    A value it does not list is a branch of its own under the root (_macros/sensitive.sql.j2). -#}
{% macro default__sqlanon_hier_rows(hierarchy) %}
{%- set ns = namespace(rows=[]) -%}
{%- for v, labels in (hierarchy or {}).items() -%}
{%- set ls = [labels] if labels is string else (labels or []) | list -%}
{%- set ls = ls[:-1] if ls and ls[-1] == '*' else ls -%}
{%- for g in ls -%}
{%- set lit_v = adapter.dispatch('sqlanon_literal', 'sqlanon')(v | string) -%}
{%- set lit_g = adapter.dispatch('sqlanon_literal', 'sqlanon')(g | string) -%}
{%- set ns.rows = ns.rows + ['SELECT ' ~ lit_v ~ ' AS s, ' ~ loop.index ~ ' AS lvl, ' ~ lit_g ~ ' AS g'] -%}
{%- endfor -%}
{%- endfor -%}
{%- if ns.rows -%}{{ ns.rows | join(' UNION ALL ') }}{%- else -%}SELECT '' AS s, 0 AS lvl, '' AS g WHERE 1 = 0{%- endif -%}
{% endmacro %}

{#- Spark reads a backslash in a string literal as an escape (\' is a quote): double it too. -#}
{% macro spark__sqlanon_literal(value) %}
{%- if value is number and value is not sameas true and value is not sameas false -%}
{{ value }}
{%- else -%}
'{{ value | string | replace("\\", "\\\\") | replace("'", "\\'") }}'
{%- endif -%}
{% endmacro %}
