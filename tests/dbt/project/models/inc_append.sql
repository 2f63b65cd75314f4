{{ config(materialized='incremental', incremental_strategy='append') }}
select id, name, created_at from {{ ref('people') }}
{% if is_incremental() %} where created_at > (select max(created_at) from {{ this }}) {% endif %}
