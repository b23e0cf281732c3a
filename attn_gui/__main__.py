from attn_gui.cli import main

raise SystemExit(main())
