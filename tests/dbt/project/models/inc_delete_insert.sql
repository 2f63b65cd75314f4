{{ config(materialized='incremental', incremental_strategy='delete+insert', unique_key='id') }}
select id, name, created_at from {{ ref('people') }}
