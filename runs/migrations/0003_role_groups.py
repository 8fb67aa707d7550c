"""The role groups (viewer, submitter, pack maintainer, reviewer, admin) with their permissions.

The role table is frozen here as it stood when this migration was written; runs.roles keeps
the current one and tops groups up after every migrate (add-only).
"""

from django.contrib.auth.management import create_permissions
from django.db import migrations

BROWSE = ["packs.browse"]
ROLES = {
    "viewer": BROWSE,
    "submitter": [*BROWSE, "runs.add_run"],
    "pack maintainer": [*BROWSE, "packs.add_contractversion"],
    "reviewer": [
        *BROWSE,
        "packs.view_privileged",
        "runs.add_evaluation",
        "runs.view_auditevent",
    ],
    "admin": [
        *BROWSE,
        "runs.add_run",
        "packs.add_contractversion",
        "packs.view_privileged",
        "runs.add_evaluation",
        "runs.view_auditevent",
    ],
}


def create_role_groups(apps, schema_editor):
    # Permissions are normally created after migrate; the groups need them now.
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    Group = apps.get_model("auth", "Group")
    Permission = apps.get_model("auth", "Permission")
    for name, codes in ROLES.items():
        group, _ = Group.objects.get_or_create(name=name)
        for code in codes:
            app_label, codename = code.split(".")
            group.permissions.add(
                Permission.objects.get(content_type__app_label=app_label, codename=codename)
            )


class Migration(migrations.Migration):
    dependencies = [
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("packs", "0002_pack_maintainers_and_permissions"),
        ("runs", "0002_audit_event"),
    ]

    operations = [migrations.RunPython(create_role_groups, migrations.RunPython.noop)]
