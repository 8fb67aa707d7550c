from django.db import migrations


def text_sizes_in_characters(apps, schema_editor):
    # A text resource's size is now its length in characters (the compiler's), no longer the
    # bytes of its JSON encoding. Values are read here, by the migration only, to count them.
    Resource = apps.get_model("packs", "Resource")
    SealedValue = apps.get_model("packs", "SealedValue")
    changed = []
    texts = Resource.objects.filter(kind="text").only("id", "lane", "size", "public_value")
    for resource in texts.iterator(chunk_size=2000):
        if resource.lane == "public":
            value = resource.public_value
        else:
            sealed = SealedValue.objects.filter(resource_id=resource.id).first()
            value = sealed.value if sealed is not None else None
        if isinstance(value, str) and resource.size != len(value):
            resource.size = len(value)
            changed.append(resource)
    Resource.objects.bulk_update(changed, ["size"], batch_size=2000)


class Migration(migrations.Migration):
    dependencies = [("packs", "0003_version_state_and_canaries")]

    operations = [migrations.RunPython(text_sizes_in_characters, migrations.RunPython.noop)]
